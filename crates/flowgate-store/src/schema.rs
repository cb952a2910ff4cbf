//! The one diesel schema both backends share (see [`crate::types`] for the column types).
//! Written by hand to match `migrations/postgres` and `migrations/sqlite`; the migration tests
//! check that every query runs on both. `analytics_events` has no entry: its writes (`COPY`,
//! multi-row inserts) and reads (the results' streams) are SQL of their own, over the columns
//! of `event_columns.rs`.
#![allow(missing_docs)]

diesel::table! {
    use diesel::sql_types::*;

    catalog_revision (id) {
        id -> Integer,
        revision -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    workspaces (id) {
        id -> Uuid,
        name -> Text,
        created_at -> Instant,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    apps (id) {
        id -> Uuid,
        workspace_id -> Uuid,
        name -> Text,
        media_base_url -> Text,
        icon_base_url -> Text,
        cache_ttl_seconds -> Nullable<Integer>,
        saved_groups -> Text,
        created_at -> Instant,
        /// The App Store bundle id (D30); NULL: none.
        apple_bundle_id -> Nullable<Text>,
        /// The App Store environments as a JSON array of strings (D30); NULL: the default.
        apple_environments -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    flows (id) {
        id -> Uuid,
        app_id -> Uuid,
        name -> Text,
        published_version -> Nullable<Integer>,
        created_at -> Instant,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    flow_versions (id) {
        id -> Uuid,
        flow_id -> Uuid,
        version -> Integer,
        schema_version -> Integer,
        flow_schema -> Text,
        fonts -> Text,
        created_at -> Instant,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    placements (id) {
        id -> BigInt,
        app_id -> Uuid,
        key -> Text,
        default_flow_id -> Nullable<Uuid>,
        created_at -> Instant,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    experiments (id) {
        id -> Uuid,
        app_id -> Uuid,
        name -> Text,
        status -> Text,
        seed -> Nullable<Text>,
        coverage -> Nullable<Double>,
        namespace_id -> Nullable<Text>,
        namespace_start -> Nullable<Double>,
        namespace_end -> Nullable<Double>,
        created_at -> Instant,
        hash_version -> Nullable<Integer>,
        sticky -> Bool,
        bucket_version -> Integer,
        min_bucket_version -> Integer,
        fallback_attribute -> Nullable<Text>,
        analysis -> Nullable<Text>,
        starts_at -> Nullable<Instant>,
        ends_at -> Nullable<Instant>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::Uuid;

    variants (id) {
        id -> Uuid,
        experiment_id -> Uuid,
        position -> Integer,
        name -> Text,
        weight -> Double,
        flow_id -> Nullable<Uuid>,
        flow_version -> Nullable<Integer>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::Uuid;

    rules (placement_id, position) {
        placement_id -> BigInt,
        position -> Integer,
        audience -> Nullable<Text>,
        flow_id -> Nullable<Uuid>,
        experiment_id -> Nullable<Uuid>,
        enabled -> Bool,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    api_keys (id) {
        id -> Uuid,
        workspace_id -> Uuid,
        digest -> Binary,
        display_prefix -> Text,
        key_type -> Text,
        environment -> Text,
        name -> Text,
        created_at -> Instant,
        revoked_at -> Nullable<Instant>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    /// Keys of type `webhook` (D30), apart from `api_keys` for release 0.2.0 (D26); the same
    /// columns.
    webhook_keys (id) {
        id -> Uuid,
        workspace_id -> Uuid,
        digest -> Binary,
        display_prefix -> Text,
        key_type -> Text,
        environment -> Text,
        name -> Text,
        created_at -> Instant,
        revoked_at -> Nullable<Instant>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    analytics_dead_letters (id) {
        id -> Uuid,
        event_id -> Nullable<Uuid>,
        app_id -> Nullable<Uuid>,
        format -> Text,
        payload -> Binary,
        error -> Text,
        first_attempt_at -> Instant,
        last_attempt_at -> Instant,
        attempts -> Integer,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::Instant;

    catalog_imports (id) {
        id -> BigInt,
        revision -> BigInt,
        imported_at -> Instant,
        sha256 -> Text,
        file -> Text,
        workspaces -> BigInt,
        apps -> BigInt,
        flows -> BigInt,
        versions -> BigInt,
        placements -> BigInt,
        keys -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    sticky_assignments (app_id, attribute_name, attribute_value, assignment_key) {
        app_id -> Uuid,
        attribute_name -> Text,
        attribute_value -> Text,
        assignment_key -> Text,
        variant_key -> Text,
        updated_at -> Instant,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    store_notifications (app_id, source, notification_id) {
        app_id -> Uuid,
        source -> Text,
        notification_id -> Text,
        format -> Integer,
        notification_type -> Text,
        subtype -> Nullable<Text>,
        environment -> Nullable<Text>,
        user_id -> Nullable<Text>,
        transaction_id -> Nullable<Text>,
        original_transaction_id -> Nullable<Text>,
        product_id -> Nullable<Text>,
        purchased_at -> Nullable<Instant>,
        price -> Nullable<Double>,
        currency -> Nullable<Text>,
        trial -> Bool,
        refunded -> Bool,
        payload -> Text,
        received_at -> Instant,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    catalog_revision,
    workspaces,
    apps,
    flows,
    flow_versions,
    placements,
    experiments,
    variants,
    rules,
    api_keys,
    webhook_keys,
    analytics_dead_letters,
    catalog_imports,
    sticky_assignments,
);

// People, console sessions, sign-in links, the console's secret, the audit log and proposed
// catalog changes (D28; `people.rs`, `audit.rs`, `changes.rs`). Never joined with each other
// or the catalog's tables.

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    people (id) {
        id -> Uuid,
        email -> Text,
        role -> Text,
        disabled -> Bool,
        password_hash -> Nullable<Text>,
        created_at -> Instant,
        updated_at -> Instant,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    sign_in_links (token_hash) {
        token_hash -> Text,
        person_id -> Uuid,
        created_at -> Instant,
        expires_at -> Instant,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    console_sessions (id_hash) {
        id_hash -> Text,
        format -> Integer,
        person_id -> Nullable<Uuid>,
        actor -> Text,
        role -> Text,
        csrf -> Text,
        created_at -> Instant,
        expires_at -> Instant,
        address -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::Instant;

    console_secret (id) {
        id -> Integer,
        secret -> Binary,
        created_at -> Instant,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::Instant;

    audit_log (id) {
        id -> BigInt,
        format -> Integer,
        at -> Instant,
        actor -> Text,
        action -> Text,
        target -> Nullable<Text>,
        comment -> Nullable<Text>,
        revision_before -> Nullable<BigInt>,
        revision_after -> Nullable<BigInt>,
        detail -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    catalog_changes (id) {
        id -> Uuid,
        format -> Integer,
        author -> Text,
        created_at -> Instant,
        base_revision -> BigInt,
        change -> Text,
        summary -> Text,
        comment -> Text,
        state -> Text,
        decided_by -> Nullable<Text>,
        decided_at -> Nullable<Instant>,
        applied_revision -> Nullable<BigInt>,
        note -> Nullable<Text>,
        apply_at -> Nullable<Instant>,
    }
}

// Staged rollouts, their applied steps and the scheduler's leases (D29; `rollouts.rs`).
// Never joined with the catalog's tables.

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    rollouts (id) {
        id -> Uuid,
        format -> Integer,
        app_id -> Uuid,
        placement -> Text,
        experiment_id -> Uuid,
        control_variant -> Uuid,
        treatment_variant -> Uuid,
        from_flow -> Uuid,
        to_flow -> Uuid,
        to_version -> Nullable<Integer>,
        plan -> Text,
        state -> Text,
        reason -> Nullable<Text>,
        created_by -> Text,
        created_at -> Instant,
        updated_at -> Instant,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::{Instant, Uuid};

    rollout_steps (rollout_id, step_index) {
        rollout_id -> Uuid,
        step_index -> Integer,
        share -> Double,
        applied_at -> Instant,
        revision -> BigInt,
        figures -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::sql::Instant;

    scheduler_leases (name) {
        name -> Text,
        holder -> Text,
        expires_at -> Instant,
    }
}

diesel::allow_tables_to_appear_in_same_query!(rollouts, rollout_steps);
