//! The control plane's use cases on the domain's in-memory store: an import, a change, a
//! scheduled change and a rollout through the scheduler's pass, each recorded once. The same
//! use cases run on SQLite and PostgreSQL in `flowgate-store`'s tests and through the binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use flowgate_control::changes::{apply_change, ChangeFailure};
use flowgate_control::import::{import_text, FileFormat};
use flowgate_control::results::ResultsSettings;
use flowgate_control::rollouts::{self, roll_back, start, Outcome, StartRequest};
use flowgate_control::scheduler::{pass, PassInputs};
use flowgate_control::schedules::{DueOutcome, ScheduleWatch};
use flowgate_domain::catalog::{CatalogChange, ExperimentStatus};
use flowgate_domain::ids::{AppId, ChangeId, ExperimentId, FlowId};
use flowgate_domain::memory::InMemoryStore;
use flowgate_domain::people::{AuditAction, AuditQuery, ChangeRecord, ChangeState};
use flowgate_domain::ports::{AuditLog, CatalogSource, ChangeStore};
use flowgate_domain::rollouts::{RolloutPlan, RolloutState};
use serde_json::json;
use time::macros::datetime;
use time::OffsetDateTime;

const EXPERIMENT: &str = "9b2f3c70-0000-4000-8000-0000000000c1";
const APP: &str = "9b2f3c70-0000-4000-8000-0000000000a1";
const WELCOME: &str = "9b2f3c70-0000-4000-8000-0000000000f1";
const PAYWALL_A: &str = "9b2f3c70-0000-4000-8000-0000000000f2";
const NOW: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);

/// The domain's example catalog, with a rule serving the Welcome flow on `onboarding` (a rule
/// a rollout can roll).
fn catalog_text() -> String {
    let text = include_str!("../../flowgate-domain/examples/catalog.json");
    let mut value: serde_json::Value = serde_json::from_str(text).unwrap();
    let placement = &mut value["workspaces"][0]["apps"][0]["placements"][0];
    assert_eq!(placement["key"], "onboarding");
    placement["rules"] = serde_json::json!([{ "flow_id": WELCOME }]);
    value.to_string()
}

async fn imported() -> InMemoryStore {
    let store = InMemoryStore::new();
    let path = Path::new("catalog.json");
    let report = import_text(&store, path, FileFormat::Json, &catalog_text(), NOW)
        .await
        .unwrap();
    assert!(report.changed);
    assert_eq!(report.revision, store.revision().await.unwrap());
    store
}

fn pause() -> CatalogChange {
    CatalogChange::SetExperimentStatus {
        experiment: EXPERIMENT.parse().unwrap(),
        status: ExperimentStatus::Paused,
    }
}

fn status(data: &flowgate_domain::catalog::CatalogData) -> Option<ExperimentStatus> {
    let id: ExperimentId = EXPERIMENT.parse().unwrap();
    let catalog = flowgate_domain::Catalog::build(data.clone()).unwrap();
    catalog.experiment(id).map(|(_, e)| e.status())
}

#[tokio::test]
async fn an_import_and_a_change_are_written_once_with_their_audit_entries() {
    let store = imported().await;
    let path = Path::new("catalog.json");
    let again = import_text(&store, path, FileFormat::Json, &catalog_text(), NOW)
        .await
        .unwrap();
    assert!(!again.changed, "the same file again writes nothing");

    let base = store.revision().await.unwrap();
    let applied = apply_change(&store, &pause(), base, "ann@example.com", "why", None, NOW)
        .await
        .unwrap();
    assert_eq!(
        (applied.revision_before, applied.revision),
        (base, base + 1)
    );
    assert_eq!(
        status(&store.load_catalog().await.unwrap()),
        Some(ExperimentStatus::Paused)
    );
    let audit = store.list_audit(&AuditQuery::latest(10)).await.unwrap();
    let actions: Vec<AuditAction> = audit.iter().map(|e| e.action).collect();
    assert_eq!(
        actions,
        [AuditAction::CatalogChange, AuditAction::CatalogImport]
    );
    assert_eq!(audit[0].revision_after, Some(base + 1));

    // The same change made on the old revision is stale, and nothing is written.
    let stale = apply_change(&store, &pause(), base, "bob@example.com", "", None, NOW).await;
    assert!(
        matches!(stale, Err(ChangeFailure::Stale { current, .. }) if current == base + 1),
        "{stale:?}"
    );
    assert_eq!(store.revision().await.unwrap(), base + 1);
    assert_eq!(
        store
            .list_audit(&AuditQuery::latest(10))
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn the_pass_applies_a_scheduled_change_once() {
    let store = imported().await;
    let id = ChangeId::new_v7(NOW);
    let record = ChangeRecord {
        id,
        author: "ann@example.com".to_owned(),
        created_at: NOW,
        base_revision: store.revision().await.unwrap(),
        change: pause().to_json(),
        summary: "pause paywall-price".to_owned(),
        comment: String::new(),
        state: ChangeState::Pending,
        decided_by: None,
        decided_at: None,
        applied_revision: None,
        note: None,
        apply_at: Some(NOW + Duration::from_secs(60)),
    };
    store.insert_change(record).await.unwrap();
    let settings = ResultsSettings::default();
    let inputs = PassInputs {
        reader: &store,
        results: &settings,
        settle: Duration::ZERO,
    };
    let mut watch = ScheduleWatch::default();

    let early = pass(&store, &inputs, NOW, &mut watch).await;
    assert!(early.changes.unwrap().is_empty(), "not due yet");
    let later = NOW + Duration::from_secs(120);
    let due = pass(&store, &inputs, later, &mut watch).await;
    let changes = due.changes.unwrap();
    assert!(
        matches!(changes.as_slice(), [(c, DueOutcome::Applied(_))] if *c == id),
        "{changes:?}"
    );
    let again = pass(&store, &inputs, later, &mut watch).await;
    assert!(again.changes.unwrap().is_empty(), "applied once");
    let stored = store.change(id).await.unwrap().unwrap();
    assert_eq!(stored.state, ChangeState::Applied);
    assert_eq!(
        status(&store.load_catalog().await.unwrap()),
        Some(ExperimentStatus::Paused)
    );
}

/// The rule of `onboarding` as stored: the flow it serves and its experiment, if any.
async fn onboarding_rule(store: &InMemoryStore) -> (Option<String>, bool) {
    let data = store.load_catalog().await.unwrap();
    let rule = &data.workspaces[0].apps[0].placements[0].rules[0];
    let value = serde_json::to_value(rule).unwrap();
    (
        value["flow_id"].as_str().map(str::to_owned),
        !value["experiment"].is_null(),
    )
}

#[tokio::test]
async fn a_rollout_waits_for_users_is_paused_and_rolled_back_once() {
    let store = imported().await;
    let request = StartRequest {
        app: APP.parse::<AppId>().unwrap(),
        placement: "onboarding".to_owned(),
        flow: PAYWALL_A.parse::<FlowId>().unwrap(),
        version: None,
        plan: RolloutPlan {
            steps: vec![10.0, 100.0],
            hold_secs: 60,
            minimum_users: 1,
            guardrails: vec!["flow_complete".to_owned()],
            optional_guardrails: Vec::new(),
        },
        actor: "ann@example.com".to_owned(),
        comment: "try the paywall first".to_owned(),
    };
    let rollout = start(&store, request.clone(), NOW).await.unwrap();
    assert_eq!(rollout.state, RolloutState::Running);
    assert_eq!(rollout.applied[0].revision, store.revision().await.unwrap());
    assert!(onboarding_rule(&store).await.1, "the rule runs the rollout");
    let again = start(&store, request, NOW).await;
    assert!(
        again.is_err(),
        "one rollout at a time per placement: {again:?}"
    );

    let settings = ResultsSettings::default();
    let inputs = PassInputs {
        reader: &store,
        results: &settings,
        settle: Duration::ZERO,
    };
    let mut watch = ScheduleWatch::default();
    let later = NOW + Duration::from_secs(3600);
    let moved = pass(&store, &inputs, later, &mut watch)
        .await
        .rollouts
        .unwrap();
    assert!(
        matches!(moved.as_slice(), [(id, Ok(Outcome::Waited(_)))] if *id == rollout.id),
        "no users yet: {moved:?}"
    );
    let paused = rollouts::pause(&store, rollout.id, "bob@example.com", "look first", later).await;
    assert_eq!(paused.unwrap().state, RolloutState::Paused);
    let moved = pass(&store, &inputs, later, &mut watch)
        .await
        .rollouts
        .unwrap();
    assert!(moved.is_empty(), "a paused rollout is not moved: {moved:?}");

    let back = roll_back(
        &store,
        rollout.id,
        "bob@example.com",
        "no",
        json!(null),
        later,
    )
    .await;
    assert_eq!(back.unwrap().state, RolloutState::RolledBack);
    assert_eq!(
        onboarding_rule(&store).await,
        (Some(WELCOME.to_owned()), false)
    );
    let twice = roll_back(
        &store,
        rollout.id,
        "bob@example.com",
        "no",
        json!(null),
        later,
    )
    .await;
    assert!(twice.is_err(), "rolled back once: {twice:?}");
}

#[tokio::test]
async fn the_console_previews_applies_and_lists_through_the_same_use_cases() {
    use flowgate_control::console::{Console, RolloutMove, RolloutStart};
    use flowgate_domain::keys::{KeyEnvironment, KeyType};
    let store = std::sync::Arc::new(imported().await);
    let console = Console::new(store.clone());

    let preview = console
        .preview("catalog.json", &catalog_text())
        .await
        .unwrap();
    assert!(!preview.changed, "the stored file again changes nothing");
    let refused = console.preview("catalog.json", "{").await;
    assert!(refused.is_err(), "{refused:?}");

    let base = store.revision().await.unwrap();
    let seen = console.preview_change(pause()).await.unwrap();
    assert_eq!((seen.revision_before, seen.revision), (base, base));
    let done = console
        .apply_change(pause(), base, "ann@example.com".into(), "why".into(), None)
        .await
        .unwrap();
    assert_eq!(done.revision, base + 1);
    let stale = console
        .apply_change(pause(), base, "ann@example.com".into(), String::new(), None)
        .await
        .unwrap_err();
    assert_eq!(
        (stale.code.as_str(), stale.unavailable),
        ("stale_base", false)
    );
    let history = console.import_history(10).await.unwrap();
    let revisions: Vec<u64> = history.iter().map(|r| r.revision).collect();
    assert_eq!(revisions, [base + 1, base], "newest first");

    let data = console.catalog().await.unwrap();
    let workspace = data.workspaces[0].id;
    let key = console
        .create_key(workspace, KeyEnvironment::Test, KeyType::Sdk, "web".into())
        .await
        .unwrap();
    let listed = console.list_keys(workspace).await.unwrap();
    assert!(listed.iter().any(|k| k.id == key.record.id));
    let revoked = console.revoke_key(key.record.id).await.unwrap();
    assert!(revoked.revoked_at.is_some());

    let start = RolloutStart {
        app: APP.parse().unwrap(),
        placement: "onboarding".to_owned(),
        flow: PAYWALL_A.parse().unwrap(),
        version: None,
        plan: RolloutPlan {
            steps: vec![10.0, 100.0],
            hold_secs: 60,
            minimum_users: 1,
            guardrails: vec!["flow_complete".to_owned()],
            optional_guardrails: Vec::new(),
        },
    };
    let rollout = console
        .start_rollout(start, "ann@example.com".into(), String::new())
        .await
        .unwrap();
    let wrong = console
        .move_rollout(
            rollout.id,
            RolloutMove::Resume,
            "bob@example.com".into(),
            String::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        wrong.code, "wrong_state",
        "a running rollout is not resumed"
    );
    let paused = console
        .move_rollout(
            rollout.id,
            RolloutMove::Pause,
            "bob@example.com".into(),
            String::new(),
        )
        .await
        .unwrap();
    assert_eq!(paused.state, RolloutState::Paused);
    assert_eq!(console.list_rollouts().await.unwrap().len(), 1);
}

#[tokio::test]
async fn people_are_added_linked_and_changed_with_their_audit_entries() {
    use flowgate_control::people::{self, PeopleFailure};
    use flowgate_domain::people::{sha256_hex, PersonUpdate, Role};
    use flowgate_domain::ports::PeopleStore;
    let store = InMemoryStore::new();
    let added = people::add(&store, ("Ann@Example.com", Role::Editor), "cli", NOW)
        .await
        .unwrap();
    assert_eq!(added.person.email, "ann@example.com");
    assert_eq!(added.expires_at, NOW + people::LINK_LIFETIME);
    let hash = sha256_hex(added.secret.as_bytes());
    let link = store.sign_in_link(&hash, NOW).await.unwrap();
    assert_eq!(link, Some(added.person.id), "the link is stored");

    let again = people::add(&store, ("ann@example.com", Role::Viewer), "cli", NOW).await;
    assert!(matches!(again, Err(PeopleFailure::Exists(_))), "{again:?}");
    let bad = people::add(&store, ("not an email", Role::Viewer), "cli", NOW).await;
    assert!(matches!(bad, Err(PeopleFailure::Invalid(_))), "{bad:?}");
    let nobody = people::link(&store, "bob@example.com", "cli", NOW).await;
    assert!(
        matches!(nobody, Err(PeopleFailure::NotFound(_))),
        "{nobody:?}"
    );

    let change = PersonUpdate {
        role: Some(Role::Admin),
        ..PersonUpdate::default()
    };
    let (after, audit) = people::update(&store, "ann@example.com", change, "cli", NOW)
        .await
        .unwrap();
    assert_eq!((after.role, audit.is_none()), (Role::Admin, true));
    let entries = store.list_audit(&AuditQuery::latest(10)).await.unwrap();
    let actions: Vec<AuditAction> = entries.iter().map(|e| e.action).collect();
    assert_eq!(actions, [AuditAction::PersonRole, AuditAction::PersonAdd]);
    assert_eq!(entries[0].detail["from"], "editor");
    assert_eq!(entries[0].detail["to"], "admin");
}

/// A pending change by `author`, stored.
async fn proposed(store: &InMemoryStore, author: &str, n: u8) -> ChangeId {
    let id = ChangeId::new_v7(NOW + Duration::from_secs(u64::from(n)));
    let record = ChangeRecord {
        id,
        author: author.to_owned(),
        created_at: NOW,
        base_revision: store.revision().await.unwrap(),
        change: pause().to_json(),
        summary: "pause paywall-price".to_owned(),
        comment: "the price test is done".to_owned(),
        state: ChangeState::Pending,
        decided_by: None,
        decided_at: None,
        applied_revision: None,
        note: None,
        apply_at: None,
    };
    store.insert_change(record).await.unwrap();
    id
}

/// D35: a pending change is rejected with why by someone other than its author, once, or
/// withdrawn by its author or cancelled from the command line; each decision is audited and
/// nothing reaches the catalog.
#[tokio::test]
async fn a_change_is_rejected_with_why_or_withdrawn_once() {
    use flowgate_control::review::decide::{reject, withdraw, DecideFailure, Withdrawal};
    let store = imported().await;
    let revision = store.revision().await.unwrap();
    let id = proposed(&store, "ann@example.com", 1).await;

    let own = reject(&store, id, "ann@example.com", "no", NOW).await;
    assert!(matches!(own, Err(DecideFailure::OwnChange)), "{own:?}");
    let bare = reject(&store, id, "bo@example.com", "  \n", NOW).await;
    assert!(matches!(bare, Err(DecideFailure::Comment(_))), "{bare:?}");
    let long = reject(&store, id, "bo@example.com", &"x".repeat(2001), NOW).await;
    assert!(matches!(long, Err(DecideFailure::Comment(m)) if m.contains("2001")));
    let nul = reject(&store, id, "bo@example.com", "a\0b", NOW).await;
    assert!(matches!(nul, Err(DecideFailure::Comment(m)) if m.contains("U+0000")));
    let unknown = reject(&store, ChangeId::new_v7(NOW), "bo@example.com", "why", NOW).await;
    assert!(
        matches!(unknown, Err(DecideFailure::NotFound(_))),
        "{unknown:?}"
    );

    let rejected = reject(&store, id, "bo@example.com", " not before the sale ", NOW)
        .await
        .unwrap();
    assert_eq!(rejected.state, ChangeState::Rejected);
    assert_eq!(rejected.decided_by.as_deref(), Some("bo@example.com"));
    assert_eq!(rejected.note.as_deref(), Some("not before the sale"));
    let again = reject(&store, id, "cy@example.com", "me too", NOW).await;
    assert!(
        matches!(
            again,
            Err(DecideFailure::NotPending {
                state: "rejected",
                ..
            })
        ),
        "{again:?}"
    );
    let late = withdraw(&store, id, "ann@example.com", Withdrawal::ByAuthor, NOW).await;
    assert!(
        matches!(late, Err(DecideFailure::NotPending { .. })),
        "{late:?}"
    );

    let second = proposed(&store, "ann@example.com", 2).await;
    let theirs = withdraw(&store, second, "bo@example.com", Withdrawal::ByAuthor, NOW).await;
    assert!(
        matches!(theirs, Err(DecideFailure::NotAuthor)),
        "{theirs:?}"
    );
    let withdrawn = withdraw(&store, second, "ann@example.com", Withdrawal::ByAuthor, NOW)
        .await
        .unwrap();
    assert_eq!(withdrawn.state, ChangeState::Withdrawn);
    let third = proposed(&store, "ann@example.com", 3).await;
    let how = Withdrawal::Cancelled { note: "cancelled" };
    let cancelled = withdraw(&store, third, "cli", how, NOW).await.unwrap();
    assert_eq!(
        (cancelled.state, cancelled.note.as_deref()),
        (ChangeState::Withdrawn, Some("cancelled"))
    );

    let audit = store.list_audit(&AuditQuery::latest(50)).await.unwrap();
    let decided: Vec<(String, AuditAction, Option<String>)> = audit
        .iter()
        .filter(|e| {
            matches!(
                e.action,
                AuditAction::ChangeReject | AuditAction::ChangeWithdraw
            )
        })
        .map(|e| (e.actor.clone(), e.action, e.comment.clone()))
        .collect();
    assert_eq!(decided.len(), 3, "one entry per decision: {decided:?}");
    assert!(decided.contains(&(
        "bo@example.com".to_owned(),
        AuditAction::ChangeReject,
        Some("not before the sale".to_owned())
    )));
    assert_eq!(
        store.revision().await.unwrap(),
        revision,
        "the catalog is untouched"
    );
}
