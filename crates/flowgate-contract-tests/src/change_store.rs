//! [`ChangeStore`] contract (D28): proposed changes come back whole (their JSON kept as
//! given), are listed newest first, all or by state, and a decision is compare-and-set: only a
//! pending change moves, once, whoever decides at the same time.
//!
//! Each case takes a fresh, empty store; the runner calls every case once per adapter.

use flowgate_domain::ids::ChangeId;
use flowgate_domain::people::{ChangeDecision, ChangeRecord, ChangeState};
use flowgate_domain::ports::{ChangeStore, StoreError};
use serde_json::json;

use crate::fixtures::at;
use crate::people_store::{both, ok};

pub(crate) fn change_id(n: u128) -> ChangeId {
    ChangeId::from_uuid(uuid::Uuid::from_u128(
        0x6000_0000_0000_4000_8000_0000_0000_0000 + n,
    ))
}

/// A pending change `n`, proposed at `at(created)`.
pub(crate) fn change(n: u128, created: i64) -> ChangeRecord {
    ChangeRecord {
        id: change_id(n),
        author: "ann@example.com".to_owned(),
        created_at: at(created),
        base_revision: 40 + n as u64,
        change: json!({"format": 1, "kind": "ship_variant", "experiment_id": n.to_string(),
                       "weights": [0.5, 0.25, 0.25], "big": 9_007_199_254_740_993_u64}),
        summary: format!("ship trial of paywall-price-test {n}"),
        comment: "the trial earns more\nsee the report".to_owned(),
        state: ChangeState::Pending,
        decided_by: None,
        decided_at: None,
        applied_revision: None,
        note: None,
        apply_at: None,
    }
}

pub(crate) fn applied(by: &str, at_n: i64, revision: u64) -> ChangeDecision {
    ChangeDecision {
        state: ChangeState::Applied,
        by: by.to_owned(),
        at: at(at_n),
        applied_revision: Some(revision),
        note: None,
    }
}

async fn insert<S: ChangeStore + ?Sized>(store: &S, change: &ChangeRecord) {
    ok(store.insert_change(change.clone()).await, "insert_change");
}

async fn get<S: ChangeStore + ?Sized>(store: &S, id: ChangeId) -> Option<ChangeRecord> {
    ok(store.change(id).await, "change")
}

fn ids(changes: &[ChangeRecord]) -> Vec<ChangeId> {
    changes.iter().map(|c| c.id).collect()
}

/// A change comes back as inserted; a taken id is a conflict; lists are newest first, all or
/// of one state, up to the limit.
pub async fn changes_round_trip_and_list_by_state<S: ChangeStore + ?Sized>(store: &S) {
    let (c1, c2, c3) = (change(1, 1), change(2, 2), change(3, 3));
    let mut failed = change(4, 4);
    failed.state = ChangeState::Failed;
    failed.decided_by = Some("scheduler".to_owned());
    failed.decided_at = Some(at(5));
    failed.note = Some("the catalog changed since revision 44".to_owned());
    for c in [&c2, &failed, &c1, &c3] {
        insert(store, c).await;
    }
    assert_eq!(get(store, c2.id).await, Some(c2.clone()));
    assert_eq!(get(store, failed.id).await, Some(failed.clone()));
    assert_eq!(get(store, change_id(9)).await, None);

    let again = store.insert_change(change(1, 7)).await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );
    assert_eq!(get(store, c1.id).await, Some(c1.clone()));

    let list = |state, limit| store.list_changes(state, limit);
    assert_eq!(
        ok(list(None, 10).await, "list_changes"),
        [failed.clone(), c3.clone(), c2.clone(), c1.clone()]
    );
    assert_eq!(
        ids(&ok(list(Some(ChangeState::Pending), 10).await, "list")),
        [c3.id, c2.id, c1.id]
    );
    assert_eq!(
        ids(&ok(list(Some(ChangeState::Pending), 2).await, "list")),
        [c3.id, c2.id]
    );
    assert_eq!(
        ids(&ok(list(Some(ChangeState::Failed), 10).await, "list")),
        [failed.id]
    );
    assert_eq!(ok(list(Some(ChangeState::Applied), 10).await, "list"), []);
}

/// Scheduled changes (D29) come back with their time; the due ones are the pending changes
/// whose time has come, the earliest first; a decided one is no longer due.
pub async fn due_changes_are_the_pending_scheduled_ones<S: ChangeStore + ?Sized>(store: &S) {
    let mut later = change(1, 1);
    later.apply_at = Some(at(30));
    let mut sooner = change(2, 2);
    sooner.apply_at = Some(at(20));
    let mut same_time = change(3, 3);
    same_time.apply_at = Some(at(20));
    let unscheduled = change(4, 4);
    for c in [&later, &sooner, &same_time, &unscheduled] {
        insert(store, c).await;
    }
    assert_eq!(get(store, later.id).await, Some(later.clone()));
    let due = |now, limit| store.due_changes(at(now), limit);
    assert_eq!(ok(due(19, 10).await, "due_changes"), []);
    assert_eq!(
        ids(&ok(due(20, 10).await, "due_changes")),
        [sooner.id, same_time.id]
    );
    assert_eq!(
        ok(due(40, 10).await, "due_changes"),
        [sooner.clone(), same_time.clone(), later.clone()]
    );
    assert_eq!(ids(&ok(due(40, 1).await, "due_changes")), [sooner.id]);
    assert!(ok(
        store
            .decide_change(sooner.id, applied("scheduler", 21, 50))
            .await,
        "decide"
    ));
    assert_eq!(
        ids(&ok(due(40, 10).await, "due_changes")),
        [same_time.id, later.id]
    );
}

/// Deciding a pending change moves it and records the decision; a second decision of any
/// kind is `false` and changes nothing; an unknown change is `false`; a decision to pending is
/// refused.
pub async fn decide_is_compare_and_set<S: ChangeStore + ?Sized>(store: &S) {
    let c1 = change(1, 1);
    let c2 = change(2, 2);
    insert(store, &c1).await;
    insert(store, &c2).await;

    let decision = applied("bob@example.com", 10, 45);
    assert!(ok(
        store.decide_change(c1.id, decision.clone()).await,
        "decide"
    ));
    let decided = c1.clone().decided(decision);
    assert_eq!(get(store, c1.id).await, Some(decided.clone()));
    assert_eq!(decided.state, ChangeState::Applied);

    let withdraw = ChangeDecision {
        state: ChangeState::Withdrawn,
        by: "ann@example.com".to_owned(),
        at: at(11),
        applied_revision: None,
        note: None,
    };
    assert!(!ok(
        store.decide_change(c1.id, withdraw.clone()).await,
        "decide"
    ));
    assert!(!ok(
        store
            .decide_change(c1.id, applied("carl@example.com", 12, 46))
            .await,
        "decide"
    ));
    assert_eq!(get(store, c1.id).await, Some(decided.clone()));
    assert!(!ok(
        store.decide_change(change_id(9), withdraw.clone()).await,
        "decide"
    ));

    let pending = ChangeDecision {
        state: ChangeState::Pending,
        ..withdraw.clone()
    };
    let refused = store.decide_change(c2.id, pending).await;
    assert!(
        matches!(refused, Err(StoreError::Unstorable { .. })),
        "{refused:?}"
    );
    assert_eq!(get(store, c2.id).await, Some(c2.clone()));

    let failed = ChangeDecision {
        state: ChangeState::Failed,
        by: "bob@example.com".to_owned(),
        at: at(13),
        applied_revision: None,
        note: Some("the catalog changed since revision 42".to_owned()),
    };
    assert!(ok(
        store.decide_change(c2.id, failed.clone()).await,
        "decide"
    ));
    assert_eq!(get(store, c2.id).await, Some(c2.clone().decided(failed)));

    // Rejected by a reviewer with why (D35): kept with its note, listed by its state.
    let c3 = change(3, 3);
    insert(store, &c3).await;
    let rejected = ChangeDecision {
        state: ChangeState::Rejected,
        by: "dana@example.com".to_owned(),
        at: at(14),
        applied_revision: None,
        note: Some("not before the sale ends".to_owned()),
    };
    assert!(ok(
        store.decide_change(c3.id, rejected.clone()).await,
        "decide"
    ));
    let c3 = c3.decided(rejected.clone());
    assert_eq!(get(store, c3.id).await, Some(c3.clone()));
    assert!(!ok(store.decide_change(c3.id, rejected).await, "decide"));
    assert_eq!(
        ok(
            store.list_changes(Some(ChangeState::Rejected), 10).await,
            "list"
        ),
        [c3]
    );
    assert_eq!(
        ok(
            store.list_changes(Some(ChangeState::Pending), 10).await,
            "list"
        ),
        []
    );
}

/// Of two decisions on one pending change at the same time, exactly one is recorded, and the
/// stored change is that one's.
pub async fn concurrent_decisions_have_one_winner<S: ChangeStore + ?Sized>(store: &S) {
    for round in 0..10 {
        let c = change(round, round as i64);
        insert(store, &c).await;
        let bob = applied("bob@example.com", 20, 50);
        let carl = applied("carl@example.com", 21, 51);
        let (a, b) = both(
            store.decide_change(c.id, bob.clone()),
            store.decide_change(c.id, carl.clone()),
        )
        .await;
        let (a, b) = (ok(a, "decide"), ok(b, "decide"));
        assert!(a != b, "round {round}: exactly one wins ({a}, {b})");
        let winner = if a { bob } else { carl };
        assert_eq!(
            get(store, c.id).await,
            Some(c.decided(winner)),
            "round {round}"
        );
    }
}
