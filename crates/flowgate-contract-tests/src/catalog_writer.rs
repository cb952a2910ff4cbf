//! [`CatalogWriter`] contract (D13, D28, D29): a write lands only on the revision it was
//! planned on, together with its audit entry, the decision of the reviewed change it applies
//! and its rollout's record; when any of them cannot be kept (a stale revision, a change
//! decided or a rollout moved meanwhile) nothing at all is written.

use flowgate_domain::catalog::ImportSummary;
use flowgate_domain::people::{AuditAction, AuditQuery, ChangeState, NewAuditEntry};
use flowgate_domain::ports::{
    AuditLog, CatalogRecord, CatalogSource, CatalogWriteError, CatalogWriter, ChangeStore,
    RolloutStore, RolloutWrite,
};
use flowgate_domain::rollouts::RolloutState;

use crate::change_store::{applied, change};
use crate::fixtures::{self, at};
use crate::people_store::ok;
use crate::rollout_store::{rollout, step};
use crate::Harness;

/// What the cases need of an implementation.
pub trait Writer: CatalogWriter + AuditLog + ChangeStore + RolloutStore {}
impl<T: CatalogWriter + AuditLog + ChangeStore + RolloutStore + ?Sized> Writer for T {}

/// A record with an audit entry and nothing else.
fn record(minute: i64) -> CatalogRecord {
    CatalogRecord {
        at: at(minute),
        sha256: "ab".repeat(32),
        file: "catalog.json".to_owned(),
        summary: ImportSummary::default(),
        audit: Some(NewAuditEntry {
            at: at(minute),
            actor: "ann@example.com".to_owned(),
            action: AuditAction::CatalogChange,
            target: None,
            comment: Some("why".to_owned()),
            revision_before: None,
            revision_after: None,
            detail: serde_json::json!({"description": "a change"}),
        }),
        decision: None,
        rollout: None,
    }
}

/// The workspaces as JSON text, for exact comparison.
async fn workspaces<S: CatalogSource + ?Sized>(store: &S) -> String {
    let data = ok(store.load_catalog().await, "load_catalog");
    match serde_json::to_string(&data.workspaces) {
        Ok(text) => text,
        Err(e) => panic!("workspaces serialise: {e}"),
    }
}

async fn audit_count<S: AuditLog + ?Sized>(store: &S) -> usize {
    ok(
        store.list_audit(&AuditQuery::latest(100)).await,
        "list_audit",
    )
    .len()
}

async fn write<S: CatalogWriter + ?Sized>(
    store: &S,
    base: u64,
    record: CatalogRecord,
) -> Result<u64, CatalogWriteError> {
    store.write_catalog(base, fixtures::catalog(), record).await
}

/// A write at the current revision lands: the catalog, a new revision, the audit entry with
/// the revisions before and after, the reviewed change decided with the revision it left and
/// the rollout started with that revision on its first step.
pub async fn a_write_lands_with_its_record<H: Harness>(h: &H)
where
    H::Store: Writer,
{
    let store = h.store();
    let pending = change(1, 1);
    ok(store.insert_change(pending.clone()).await, "insert_change");
    let base = ok(store.revision().await, "revision");
    let mut record = record(5);
    record.decision = Some((pending.id, applied("ann@example.com", 5, 0)));
    record.rollout = Some(RolloutWrite::Start(Box::new(rollout(1, 5))));
    let after = match write(store, base, record).await {
        Ok(after) => after,
        Err(e) => panic!("write_catalog at the current revision: {e}"),
    };
    assert!(after > base, "the revision moves on: {base} -> {after}");
    assert_eq!(ok(store.revision().await, "revision"), after);
    let expected = serde_json::to_string(&fixtures::catalog().workspaces).unwrap_or_default();
    assert_eq!(workspaces(store).await, expected);

    let entries = ok(
        store.list_audit(&AuditQuery::latest(10)).await,
        "list_audit",
    );
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].revision_before, Some(base));
    assert_eq!(entries[0].revision_after, Some(after));
    assert_eq!(entries[0].comment.as_deref(), Some("why"));

    let decided = ok(store.change(pending.id).await, "change");
    let decided = decided.unwrap_or_else(|| panic!("change {} is gone", pending.id));
    assert_eq!(decided.state, ChangeState::Applied);
    assert_eq!(decided.applied_revision, Some(after));

    let history = ok(store.catalog_history(10).await, "catalog_history");
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(history[0].revision, after);
    assert_eq!(history[0].imported_at, at(5));
    assert_eq!(history[0].sha256, "ab".repeat(32));
    assert_eq!(history[0].file, "catalog.json");

    let started = ok(store.rollout(rollout(1, 5).id).await, "rollout");
    let started = started.unwrap_or_else(|| panic!("the rollout was not recorded"));
    assert_eq!(started.applied.len(), 1);
    assert_eq!(started.applied[0].revision, after);
}

/// A write planned on an older revision writes nothing and says which revision is stored.
pub async fn a_stale_write_writes_nothing<H: Harness>(h: &H)
where
    H::Store: Writer,
{
    let store = h.store();
    let base = ok(store.revision().await, "revision");
    let after = match write(store, base, record(1)).await {
        Ok(after) => after,
        Err(e) => panic!("the first write: {e}"),
    };
    let before = (workspaces(store).await, audit_count(store).await);
    match write(store, base, record(2)).await {
        Err(CatalogWriteError::Stale { base: b, current }) => {
            assert_eq!((b, current), (base, after));
        }
        other => panic!("a write at revision {base} (stored: {after}) gave {other:?}"),
    }
    assert_eq!(ok(store.revision().await, "revision"), after);
    assert_eq!((workspaces(store).await, audit_count(store).await), before);
}

/// A write whose reviewed change was decided meanwhile, or whose rollout step was recorded
/// meanwhile, writes nothing: no catalog, no revision, no audit entry, no rollout change.
pub async fn a_record_that_cannot_be_kept_undoes_the_write<H: Harness>(h: &H)
where
    H::Store: Writer,
{
    let store = h.store();
    let decided = change(2, 1);
    ok(store.insert_change(decided.clone()).await, "insert_change");
    let decision = applied("bob@example.com", 2, 7);
    assert!(ok(
        store.decide_change(decided.id, decision.clone()).await,
        "decide"
    ));
    let running = rollout(2, 1);
    ok(
        store.insert_rollout(running.clone()).await,
        "insert_rollout",
    );
    let base = ok(store.revision().await, "revision");
    let before = (workspaces(store).await, audit_count(store).await);

    let mut late = record(3);
    late.decision = Some((decided.id, applied("ann@example.com", 3, 0)));
    match write(store, base, late).await {
        Err(CatalogWriteError::Decided(id)) => assert_eq!(id, decided.id),
        other => panic!("a write applying a decided change gave {other:?}"),
    }
    let mut again = record(4);
    again.rollout = Some(RolloutWrite::Step {
        id: running.id,
        step: step(0, 4),
        change: Some((RolloutState::Running, RolloutState::Completed, None)),
    });
    match write(store, base, again).await {
        Err(CatalogWriteError::RolloutMoved(detail)) => {
            assert!(detail.contains(&running.id.to_string()), "{detail}");
        }
        other => panic!("a write of a step recorded before gave {other:?}"),
    }
    assert_eq!(ok(store.revision().await, "revision"), base);
    assert_eq!((workspaces(store).await, audit_count(store).await), before);
    let history = ok(store.catalog_history(10).await, "catalog_history");
    assert!(
        history.is_empty(),
        "an undone write is not in the history: {history:?}"
    );
    let kept = ok(store.rollout(running.id).await, "rollout");
    assert_eq!(
        kept.map(|r| (r.state, r.applied.len())),
        Some((RolloutState::Running, 1))
    );
    let kept = ok(store.change(decided.id).await, "change").map(|c| c.decided_by);
    assert_eq!(kept, Some(Some("bob@example.com".to_owned())));
}

/// A write is an upsert (D13): what it names is added or updated (an app's settings, a
/// placement whole, its rules replaced), what it does not name stays, as a change's write, which
/// holds only the changed placement or flow with its workspace and app, needs.
pub async fn a_write_keeps_what_it_does_not_name<H: Harness>(h: &H)
where
    H::Store: Writer,
{
    let store = h.store();
    let base = ok(store.revision().await, "revision");
    let after = match write(store, base, record(1)).await {
        Ok(after) => after,
        Err(e) => panic!("the first write: {e}"),
    };
    let mut partial = fixtures::catalog();
    partial.workspaces.truncate(1);
    let workspace = &mut partial.workspaces[0];
    workspace.apps.truncate(1);
    let app = &mut workspace.apps[0];
    app.name = "renamed".to_owned();
    app.flows.clear();
    let kept = app.placements.remove(0).key;
    let mut expected = fixtures::catalog();
    expected.workspaces[0].apps[0].name = "renamed".to_owned();
    let last = match store.write_catalog(after, partial, record(2)).await {
        Ok(last) => last,
        Err(e) => panic!("a partial write: {e}"),
    };
    assert!(last > after);
    let history = ok(store.catalog_history(1).await, "catalog_history");
    let revisions: Vec<u64> = history.iter().map(|r| r.revision).collect();
    assert_eq!(revisions, [last], "newest first, at most the limit");
    let loaded = ok(store.load_catalog().await, "load_catalog");
    let placements: Vec<&str> = loaded.workspaces[0].apps[0]
        .placements
        .iter()
        .map(|p| p.key.as_str())
        .collect();
    assert!(placements.contains(&kept.as_str()), "{placements:?}");
    let json = |w: &[flowgate_domain::catalog::WorkspaceData]| {
        let mut value = serde_json::to_value(w).unwrap_or_default();
        // Placements' order is the adapters' own; compare them as a set.
        for ws in value.as_array_mut().into_iter().flatten() {
            for app in ws["apps"].as_array_mut().into_iter().flatten() {
                if let Some(list) = app["placements"].as_array_mut() {
                    list.sort_by_key(|p| p["key"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
        value
    };
    assert_eq!(json(&loaded.workspaces), json(&expected.workspaces));
}
