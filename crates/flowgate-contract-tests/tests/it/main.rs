//! Runs the port contract suite (`flowgate_contract_tests`) against every implementation:
//! each case becomes `<port>::<case>::memory`, `::sqlite` and `::postgres` (see `support` for
//! how each backend gets a fresh, isolated instance).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod golden;
mod support;

/// For each case of a port module, a module `<case>` with one test per backend
/// (`flowgate_testkit::per_backend!`). `harness` cases receive the harness, `store` cases the
/// port implementation alone.
macro_rules! contract_tests {
    ($port:ident { $($kind:ident $case:ident,)* }) => {
        mod $port {
            flowgate_testkit::per_backend! {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                [
                    memory => contract_tests!(@create crate::support::Memory),
                    sqlite => contract_tests!(@create crate::support::Sqlite),
                    postgres => contract_tests!(@create crate::support::Postgres),
                ]
                $(async fn $case(harness) {
                    contract_tests!(@call $kind, harness, flowgate_contract_tests::$port::$case)
                })*
            }
        }
    };
    (@create $harness:ty) => {
        <$harness as flowgate_contract_tests::Harness>::create().await
    };
    (@call harness, $h:ident, $f:path) => { $f(&$h).await };
    (@call store, $h:ident, $f:path) => { $f(flowgate_contract_tests::Harness::store(&$h)).await };
}

contract_tests!(catalog_source {
    harness catalog_round_trip_is_exact,
    harness format_2_members_round_trip,
    harness loaded_revision_is_the_current_revision,
    harness revision_increases_on_catalog_write,
    harness revision_increases_on_key_insert,
    harness revision_increases_on_key_revoke,
    harness wait_for_change_returns_the_new_revision,
    harness loaded_keys_include_revoked_and_build_refuses_them,
});

contract_tests!(catalog_writer {
    harness a_write_lands_with_its_record,
    harness a_stale_write_writes_nothing,
    harness a_record_that_cannot_be_kept_undoes_the_write,
    harness a_write_keeps_what_it_does_not_name,
});

contract_tests!(key_store {
    harness insert_and_list_oldest_first_per_workspace,
    harness revoke_keeps_first_time,
    harness revoke_unknown_id_is_not_found,
    harness duplicate_digest_is_conflict,
    harness webhook_key_round_trip,
    harness ids_and_digests_are_unique_across_key_types,
});

contract_tests!(event_store {
    store append_batch_counts_inserted,
    store same_batch_again_is_all_duplicates,
    store duplicate_ids_within_a_batch_are_stored_once,
    store the_same_id_in_two_apps_is_two_events,
    store a_batch_of_a_thousand_events,
    store an_empty_batch_stores_nothing,
});

contract_tests!(dead_letter_store {
    store letters_round_trip_in_order,
    store an_event_refused_again_stays_one_letter,
    store the_same_event_id_in_two_apps_is_two_letters,
    store pages_continue_after_the_last_id,
    store replays_are_recorded_or_removed,
});

contract_tests!(results_source {
    store exposures_conversions_and_revenue_per_variant,
    store the_window_is_inclusive_and_outcomes_stop_at_its_end,
    store daily_counts_and_a_metric_asked_for,
    store user_ids_in_any_order_are_joined_to_their_own_events,
    store an_experiment_without_exposures_has_no_counts,
    store exposure_counts_per_experiment,
    store store_notifications_are_stored_once_and_counted,
});

contract_tests!(sticky_store {
    store unknown_identifiers_are_absent,
    store documents_round_trip,
    store writes_merge_into_stored_documents,
    store apps_are_isolated,
    store combined_reads_keep_apps_apart,
    store identifiers_are_opaque,
    store large_batches,
    store entries_that_are_not_assignments_are_skipped,
});

contract_tests!(people_store {
    store duplicate_email_is_conflict,
    store emails_are_normalised,
    store updates_end_sessions_on_role_change_and_disable,
    store sign_in_links_work_once_before_expiry,
    store concurrent_takes_of_a_link_have_one_winner,
    store sessions_expire_are_listed_and_deleted,
    store console_secret_is_the_first_candidate,
    store concurrent_first_console_secrets_agree,
    store sessions_follow_the_person_now,
    store sign_in_links_are_read_without_taking_them,
});

contract_tests!(audit_log {
    store entries_are_appended_and_listed_newest_first,
    store lists_are_filtered,
    store pages_continue_below_before_id,
    store counts_go_by_action_target_and_time,
    store retention_deletes_only_older_entries,
});

contract_tests!(change_store {
    store changes_round_trip_and_list_by_state,
    store due_changes_are_the_pending_scheduled_ones,
    store decide_is_compare_and_set,
    store concurrent_decisions_have_one_winner,
});

contract_tests!(rollout_store {
    store rollouts_round_trip_and_list_by_state,
    store apply_step_records_once,
    store concurrent_steps_have_one_winner,
    store set_rollout_state_is_compare_and_set,
    store leases_have_one_holder_until_they_expire,
});
