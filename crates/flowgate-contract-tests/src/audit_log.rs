//! [`AuditLog`] contract (D28): entries come back as appended, in this release's format, with
//! increasing ids; lists are newest first, filtered by time, actor and action, paged below an
//! id; counts go by action, exact target and time; retention deletes only older entries.
//!
//! Each case takes a fresh, empty store; the runner calls every case once per adapter.

use flowgate_domain::people::{AuditAction, AuditEntry, AuditQuery, NewAuditEntry, AUDIT_FORMAT};
use flowgate_domain::ports::AuditLog;
use serde_json::json;

use crate::fixtures::at;
use crate::people_store::ok;

/// An entry of `actor` doing `action` at `at(n)`, with a detail that names `n`.
fn entry(n: i64, actor: &str, action: AuditAction, target: Option<&str>) -> NewAuditEntry {
    NewAuditEntry {
        at: at(n),
        actor: actor.to_owned(),
        action,
        target: target.map(str::to_owned),
        comment: None,
        revision_before: None,
        revision_after: None,
        detail: json!({"n": n}),
    }
}

async fn append<S: AuditLog + ?Sized>(store: &S, entry: NewAuditEntry) -> AuditEntry {
    ok(store.append_audit(entry).await, "append_audit")
}

async fn list<S: AuditLog + ?Sized>(store: &S, query: &AuditQuery) -> Vec<AuditEntry> {
    ok(store.list_audit(query).await, "list_audit")
}

/// The `n` of each entry's detail, in the order listed.
fn ns(entries: &[AuditEntry]) -> Vec<i64> {
    entries
        .iter()
        .map(|e| e.detail["n"].as_i64().unwrap_or(-1))
        .collect()
}

/// Appended entries come back whole, in format 1, ids increasing; a list is newest first and
/// stops at its limit.
pub async fn entries_are_appended_and_listed_newest_first<S: AuditLog + ?Sized>(store: &S) {
    let change = NewAuditEntry {
        comment: Some("ship the trial: +4% \u{2192} \"ok\"".to_owned()),
        revision_before: Some(41),
        revision_after: Some(42),
        detail: json!({"n": 2, "summary": {"moved": [{"experiment": "e1", "users": 1200}]},
                       "big": 9_007_199_254_740_993_u64, "f": 0.25}),
        ..entry(
            2,
            "ann@example.com",
            AuditAction::CatalogChange,
            Some("change-1"),
        )
    };
    let written = [
        entry(1, "cli", AuditAction::CatalogImport, None),
        change,
        entry(3, "admin-token", AuditAction::SignIn, Some("admin-token")),
    ];
    let mut stored = Vec::new();
    for e in &written {
        stored.push(append(store, e.clone()).await);
    }
    for (s, w) in stored.iter().zip(&written) {
        assert_eq!(s.format, AUDIT_FORMAT);
        assert_eq!(s, &AuditEntry::new(s.id, w.clone()));
    }
    assert!(
        stored.windows(2).all(|w| w[0].id < w[1].id),
        "ids increase: {stored:?}"
    );
    let newest_first: Vec<AuditEntry> = stored.iter().rev().cloned().collect();
    assert_eq!(list(store, &AuditQuery::latest(10)).await, newest_first);
    assert_eq!(
        list(store, &AuditQuery::latest(2)).await,
        newest_first[..2].to_vec()
    );
    assert_eq!(list(store, &AuditQuery::latest(0)).await, []);
}

/// Each filter alone and together: `since` inclusive, `until` exclusive, actor and action
/// exact.
pub async fn lists_are_filtered<S: AuditLog + ?Sized>(store: &S) {
    let ann = "ann@example.com";
    let bob = "bob@example.com";
    for (n, actor, action) in [
        (1, ann, AuditAction::SignIn),
        (2, bob, AuditAction::SignIn),
        (3, ann, AuditAction::KeyCreate),
        (4, bob, AuditAction::KeyRevoke),
        (5, ann, AuditAction::SignIn),
        (6, "Ann@example.com", AuditAction::SignIn),
    ] {
        append(store, entry(n, actor, action, None)).await;
    }
    let all = AuditQuery::latest(100);
    let cases = [
        (
            AuditQuery {
                since: Some(at(3)),
                ..all.clone()
            },
            vec![6, 5, 4, 3],
        ),
        (
            AuditQuery {
                until: Some(at(3)),
                ..all.clone()
            },
            vec![2, 1],
        ),
        (
            AuditQuery {
                since: Some(at(2)),
                until: Some(at(5)),
                ..all.clone()
            },
            vec![4, 3, 2],
        ),
        (
            AuditQuery {
                actor: Some(ann.to_owned()),
                ..all.clone()
            },
            vec![5, 3, 1],
        ),
        (
            AuditQuery {
                action: Some(AuditAction::SignIn),
                ..all.clone()
            },
            vec![6, 5, 2, 1],
        ),
        (
            AuditQuery {
                actor: Some(ann.to_owned()),
                action: Some(AuditAction::SignIn),
                since: Some(at(2)),
                ..all.clone()
            },
            vec![5],
        ),
        (
            AuditQuery {
                action: Some(AuditAction::PersonAdd),
                ..all.clone()
            },
            vec![],
        ),
        (
            AuditQuery {
                actor: Some(bob.to_owned()),
                limit: 1,
                ..all.clone()
            },
            vec![4],
        ),
    ];
    for (query, expected) in cases {
        assert_eq!(ns(&list(store, &query).await), expected, "{query:?}");
    }
}

/// A page continues below the last id of the one before, until the log is exhausted; filters
/// apply to every page.
pub async fn pages_continue_below_before_id<S: AuditLog + ?Sized>(store: &S) {
    for n in 1..=7 {
        let action = if n % 2 == 0 {
            AuditAction::SignOut
        } else {
            AuditAction::SignIn
        };
        append(store, entry(n, "ann@example.com", action, None)).await;
    }
    let mut query = AuditQuery::latest(2);
    let mut pages = Vec::new();
    loop {
        let page = list(store, &query).await;
        let Some(last) = page.last() else { break };
        query.before_id = Some(last.id);
        pages.push(ns(&page));
    }
    assert_eq!(pages, [vec![7, 6], vec![5, 4], vec![3, 2], vec![1]]);

    let mut query = AuditQuery {
        action: Some(AuditAction::SignIn),
        ..AuditQuery::latest(3)
    };
    let first = list(store, &query).await;
    assert_eq!(ns(&first), [7, 5, 3]);
    query.before_id = first.last().map(|e| e.id);
    assert_eq!(ns(&list(store, &query).await), [1]);
}

/// A count takes one action with exactly one target, at or after a time.
pub async fn counts_go_by_action_target_and_time<S: AuditLog + ?Sized>(store: &S) {
    let failed = AuditAction::SignInFailed;
    for (n, action, target) in [
        (1, failed, Some("ann@example.com")),
        (2, failed, Some("ann@example.com")),
        (3, failed, Some("ann@example.com")),
        (2, failed, Some("bob@example.com")),
        (2, AuditAction::SignIn, Some("ann@example.com")),
        (2, failed, None),
        (2, failed, Some("ANN@example.com")),
    ] {
        append(store, entry(n, "192.0.2.1", action, target)).await;
    }
    let count = |action, target, since| store.count_audit(action, target, since);
    assert_eq!(
        ok(count(failed, "ann@example.com", at(2)).await, "count"),
        2
    );
    assert_eq!(
        ok(count(failed, "ann@example.com", at(0)).await, "count"),
        3
    );
    assert_eq!(
        ok(count(failed, "ann@example.com", at(4)).await, "count"),
        0
    );
    assert_eq!(
        ok(count(failed, "bob@example.com", at(0)).await, "count"),
        1
    );
    assert_eq!(
        ok(
            count(AuditAction::SignIn, "ann@example.com", at(0)).await,
            "count"
        ),
        1
    );
    assert_eq!(
        ok(count(failed, "carl@example.com", at(0)).await, "count"),
        0
    );
}

/// Retention deletes the entries before the cutoff, only those; ids go on increasing after it,
/// even when it deleted the newest.
pub async fn retention_deletes_only_older_entries<S: AuditLog + ?Sized>(store: &S) {
    for n in 1..=4 {
        append(store, entry(n, "cli", AuditAction::CatalogImport, None)).await;
    }
    assert_eq!(ok(store.delete_audit_before(at(3)).await, "retention"), 2);
    assert_eq!(ns(&list(store, &AuditQuery::latest(10)).await), [4, 3]);
    assert_eq!(ok(store.delete_audit_before(at(3)).await, "retention"), 0);
    let last_id = list(store, &AuditQuery::latest(1)).await[0].id;

    assert_eq!(ok(store.delete_audit_before(at(100)).await, "retention"), 2);
    assert_eq!(list(store, &AuditQuery::latest(10)).await, []);
    let next = append(store, entry(5, "cli", AuditAction::CatalogImport, None)).await;
    assert!(next.id > last_id, "{} after {last_id}", next.id);
}
