//! [`RolloutStore`] contract (D29): rollouts come back whole (plan, times, steps and their
//! figures as given), are listed newest first, all or by state; a step is recorded at most
//! once, together with its change of state or not at all, whoever applies it at the same
//! time; a change of state is compare-and-set; a lease has one holder until it expires or is
//! given up.
//!
//! Each case takes a fresh, empty store; the runner calls every case once per adapter.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use flowgate_domain::ids::{AppId, ExperimentId, FlowId, RolloutId, VariantId};
use flowgate_domain::ports::{RolloutStore, StateChange, StoreError};
use flowgate_domain::rollouts::{AppliedStep, Rollout, RolloutPlan, RolloutState};
use serde_json::json;

use crate::fixtures::at;
use crate::people_store::ok;

fn uuid(base: u128, n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(base + n)
}

fn rollout_id(n: u128) -> RolloutId {
    RolloutId::from_uuid(uuid(0x7000_0000_0000_4000_8000_0000_0000_0000, n))
}

/// Step `index` of the plan `[1, 5, 25, 50, 100]`, applied at `at(minute)`.
pub(crate) fn step(index: u32, minute: i64) -> AppliedStep {
    AppliedStep {
        index,
        share: [1.0, 5.0, 25.0, 50.0, 100.0][index as usize],
        applied_at: at(minute),
        revision: 40 + u64::from(index),
        figures: if index == 0 {
            serde_json::Value::Null
        } else {
            json!({"verdict": "keep_running", "treatment_users": 1250,
                   "big": 9_007_199_254_740_993_u64,
                   "metrics": {"revenue": {"control": {"mean": 1.25, "users": 1200},
                                           "treatment": {"mean": 1.5, "users": 1250}},
                               "flow_complete": [0.5, {"p": 0.031}]}})
        },
    }
}

/// Rollout `n`, running, started at `at(created)` with its first step applied.
pub(crate) fn rollout(n: u128, created: i64) -> Rollout {
    Rollout {
        id: rollout_id(n),
        app_id: AppId::from_uuid(uuid(0x2000_0000_0000_4000_8000_0000_0000_0000, n)),
        placement: format!("paywall-{n}"),
        experiment_id: ExperimentId::from_uuid(uuid(0x5100_0000_0000_4000_8000_0000_0000_0000, n)),
        control_variant: VariantId::from_uuid(uuid(0x5200_0000_0000_4000_8000_0000_0000_0000, n)),
        treatment_variant: VariantId::from_uuid(uuid(0x5300_0000_0000_4000_8000_0000_0000_0000, n)),
        from_flow: FlowId::from_uuid(uuid(0x3000_0000_0000_4000_8000_0000_0000_0000, n)),
        to_flow: FlowId::from_uuid(uuid(0x3100_0000_0000_4000_8000_0000_0000_0000, n)),
        // A version of its own, so every adapter is seen to keep it.
        to_version: Some(3),
        plan: RolloutPlan {
            steps: vec![1.0, 5.0, 25.0, 50.0, 100.0],
            hold_secs: 3600,
            minimum_users: 100,
            guardrails: vec!["revenue".to_owned(), "flow_complete".to_owned()],
            // An optional member of the plan (D35), so every adapter is seen to keep it.
            optional_guardrails: vec!["revenue".to_owned()],
        },
        state: RolloutState::Running,
        reason: None,
        created_by: "ann@example.com".to_owned(),
        created_at: at(created),
        updated_at: at(created),
        applied: vec![step(0, created)],
    }
}

async fn insert<S: RolloutStore + ?Sized>(store: &S, rollout: &Rollout) {
    ok(
        store.insert_rollout(rollout.clone()).await,
        "insert_rollout",
    );
}

async fn get<S: RolloutStore + ?Sized>(store: &S, id: RolloutId) -> Option<Rollout> {
    ok(store.rollout(id).await, "rollout")
}

fn ids(rollouts: &[Rollout]) -> Vec<RolloutId> {
    rollouts.iter().map(|r| r.id).collect()
}

fn change(from: RolloutState, to: RolloutState, reason: Option<&str>) -> StateChange {
    (from, to, reason.map(str::to_owned))
}

/// Runs `futures` at once (polled in turn in one task, so all are in flight together) and
/// returns their outputs in order.
async fn all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                if let Poll::Ready(v) = future.as_mut().poll(cx) {
                    *output = Some(v);
                }
            }
        }
        if outputs.iter().all(Option::is_some) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// A rollout comes back as inserted (its steps in index order); a taken id is a conflict;
/// lists are newest first (then by id), all or of one state; an unknown id reads as `None`.
pub async fn rollouts_round_trip_and_list_by_state<S: RolloutStore + ?Sized>(store: &S) {
    let r1 = rollout(1, 1);
    let mut r2 = rollout(2, 2);
    r2.state = RolloutState::Paused;
    r2.reason = Some("sample ratio mismatch: 48.1% / 51.9%\n(p < 0.001)".to_owned());
    r2.updated_at = at(9);
    r2.applied.push(step(1, 5));
    r2.applied.push(step(2, 8));
    // The same start as r2: the larger id first.
    let mut r3 = rollout(3, 2);
    r3.state = RolloutState::Completed;
    r3.plan = RolloutPlan {
        steps: vec![100.0],
        hold_secs: 0,
        minimum_users: 1,
        ..RolloutPlan::default()
    };
    r3.applied = vec![AppliedStep {
        share: 100.0,
        ..step(0, 2)
    }];
    let mut r4 = rollout(4, 4);
    r4.state = RolloutState::RolledBack;
    r4.reason = Some("revenue is significantly worse".to_owned());
    r4.applied.clear();
    for r in [&r2, &r4, &r1, &r3] {
        insert(store, r).await;
    }
    for r in [&r1, &r2, &r3, &r4] {
        assert_eq!(get(store, r.id).await.as_ref(), Some(r));
    }
    assert_eq!(get(store, rollout_id(9)).await, None);

    let again = store.insert_rollout(rollout(1, 7)).await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );
    assert_eq!(get(store, r1.id).await, Some(r1.clone()));

    let list = |state| store.list_rollouts(state);
    assert_eq!(
        ok(list(None).await, "list_rollouts"),
        [r4.clone(), r3.clone(), r2.clone(), r1.clone()]
    );
    assert_eq!(
        ok(list(Some(RolloutState::Paused)).await, "list_rollouts"),
        [r2.clone()]
    );
    assert_eq!(
        ids(&ok(list(Some(RolloutState::Running)).await, "list")),
        [r1.id]
    );
    assert_eq!(
        ids(&ok(list(Some(RolloutState::RolledBack)).await, "list")),
        [r4.id]
    );
    assert_eq!(
        ids(&ok(list(Some(RolloutState::Completed)).await, "list")),
        [r3.id]
    );
}

/// A step is recorded once: the same index again is `false` and changes nothing; a step
/// whose change of state starts from the wrong state is `false` and writes neither the step
/// nor the state; with the right one both are written, the state at the step's time; an
/// unknown rollout is `false`.
pub async fn apply_step_records_once<S: RolloutStore + ?Sized>(store: &S) {
    let mut r = rollout(1, 1);
    insert(store, &r).await;

    let apply = |id, step, change| store.apply_step(id, step, change);
    assert!(ok(apply(r.id, step(1, 61), None).await, "apply_step"));
    r.applied.push(step(1, 61));
    assert_eq!(get(store, r.id).await, Some(r.clone()));

    let mut other = step(1, 62);
    other.figures = json!({"other": true});
    assert!(!ok(apply(r.id, other.clone(), None).await, "apply_step"));
    let pause = change(RolloutState::Running, RolloutState::Paused, Some("held"));
    assert!(!ok(
        apply(r.id, other, Some(pause.clone())).await,
        "apply_step"
    ));
    assert_eq!(get(store, r.id).await, Some(r.clone()));

    let wrong = change(RolloutState::Paused, RolloutState::Completed, Some("done"));
    assert!(!ok(
        apply(r.id, step(2, 121), Some(wrong)).await,
        "apply_step"
    ));
    assert_eq!(get(store, r.id).await, Some(r.clone()));

    let rolled_back = change(
        RolloutState::Running,
        RolloutState::RolledBack,
        Some("revenue is significantly worse"),
    );
    assert!(ok(
        apply(r.id, step(2, 121), Some(rolled_back)).await,
        "apply_step"
    ));
    r.applied.push(step(2, 121));
    r.state = RolloutState::RolledBack;
    r.reason = Some("revenue is significantly worse".to_owned());
    r.updated_at = at(121);
    assert_eq!(get(store, r.id).await, Some(r.clone()));
    assert_eq!(
        ok(store.list_rollouts(None).await, "list_rollouts"),
        [r.clone()]
    );

    for change in [None, Some(pause)] {
        assert!(!ok(
            apply(rollout_id(9), step(1, 61), change).await,
            "apply_step"
        ));
    }
    assert_eq!(get(store, rollout_id(9)).await, None);
}

/// Of eight applications of one step at the same time (some with a change of state, some
/// without), exactly one is recorded, with its own figures and, if it had one, its change.
pub async fn concurrent_steps_have_one_winner<S: RolloutStore + ?Sized>(store: &S) {
    for round in 0..6 {
        let mut r = rollout(round, round as i64);
        insert(store, &r).await;
        let tries: Vec<(AppliedStep, Option<StateChange>)> = (0..8_u64)
            .map(|n| {
                let mut s = step(1, 100 + n as i64);
                s.figures = json!({"try": n});
                let to = (n % 2 == 1).then(|| {
                    change(
                        RolloutState::Running,
                        RolloutState::Paused,
                        Some(&format!("try {n}")),
                    )
                });
                (s, to)
            })
            .collect();
        let applied = all(tries
            .iter()
            .map(|(s, c)| store.apply_step(r.id, s.clone(), c.clone()))
            .collect())
        .await;
        let won: Vec<usize> = applied
            .into_iter()
            .enumerate()
            .filter_map(|(n, result)| ok(result, "apply_step").then_some(n))
            .collect();
        assert_eq!(won.len(), 1, "round {round}: exactly one wins ({won:?})");
        let (s, c) = tries[won[0]].clone();
        if let Some((_, to, reason)) = c {
            r.state = to;
            r.reason = reason;
            r.updated_at = s.applied_at;
        }
        r.applied.push(s);
        assert_eq!(get(store, r.id).await, Some(r), "round {round}");
    }
}

/// A change of state is compare-and-set: it moves a rollout in the state it starts from, at
/// the time given, with the reason given (none clears it); any other is `false` and changes
/// nothing; an unknown rollout is `false`.
pub async fn set_rollout_state_is_compare_and_set<S: RolloutStore + ?Sized>(store: &S) {
    let mut r = rollout(1, 1);
    insert(store, &r).await;
    let set = |c, minute| store.set_rollout_state(r.id, c, at(minute));

    let pause = change(RolloutState::Running, RolloutState::Paused, Some("by ann"));
    assert!(ok(set(pause.clone(), 10).await, "set_rollout_state"));
    r.state = RolloutState::Paused;
    r.reason = Some("by ann".to_owned());
    r.updated_at = at(10);
    assert_eq!(get(store, r.id).await, Some(r.clone()));

    assert!(!ok(set(pause, 11).await, "set_rollout_state"));
    let complete = change(RolloutState::Running, RolloutState::Completed, None);
    assert!(!ok(set(complete, 12).await, "set_rollout_state"));
    assert_eq!(get(store, r.id).await, Some(r.clone()));

    let resume = change(RolloutState::Paused, RolloutState::Running, None);
    assert!(ok(set(resume.clone(), 13).await, "set_rollout_state"));
    r.state = RolloutState::Running;
    r.reason = None;
    r.updated_at = at(13);
    assert_eq!(get(store, r.id).await, Some(r.clone()));

    assert!(!ok(
        store.set_rollout_state(rollout_id(9), resume, at(14)).await,
        "set_rollout_state"
    ));
    assert_eq!(get(store, rollout_id(9)).await, None);

    // Abandoned (issue 65): kept with its reason and steps; it has ended, so it stays.
    let abandon = change(RolloutState::Running, RolloutState::Abandoned, Some("gone"));
    assert!(ok(set(abandon.clone(), 15).await, "set_rollout_state"));
    r.state = RolloutState::Abandoned;
    r.reason = Some("gone".to_owned());
    r.updated_at = at(15);
    assert_eq!(get(store, r.id).await, Some(r.clone()));
    assert!(!ok(set(abandon, 16).await, "set_rollout_state"));
}

/// A free lease is taken; another holder is refused until it expires (at its end exactly it
/// is free); its holder renews it; a lease given up is free at once, and only its holder
/// gives it up; leases of different names are apart.
pub async fn leases_have_one_holder_until_they_expire<S: RolloutStore + ?Sized>(store: &S) {
    const NAME: &str = "rollout-scheduler";
    const OTHER: &str = "another-job";
    let t = |secs: i64| at(0) + time::Duration::seconds(secs);
    let take =
        |name, holder, secs| store.take_lease(name, holder, t(secs), Duration::from_secs(60));
    let (a, b) = ("replica-a", "replica-b");

    assert!(ok(take(NAME, a, 0).await, "take a free lease"));
    assert!(ok(take(OTHER, b, 0).await, "take a free lease"));
    assert!(!ok(take(NAME, b, 30).await, "take a's lease"));
    // Renewed: to 90 s, where it would have ended at 60 s.
    assert!(ok(take(NAME, a, 30).await, "renew"));
    assert!(!ok(take(NAME, b, 60).await, "take a's renewed lease"));
    assert!(!ok(take(NAME, b, 89).await, "take a's renewed lease"));
    assert!(ok(take(NAME, b, 90).await, "take a lease expired now"));
    assert!(!ok(take(NAME, a, 91).await, "take b's lease"));

    ok(store.release_lease(NAME, a).await, "release b's lease");
    assert!(!ok(take(NAME, a, 92).await, "take b's lease"));
    ok(store.release_lease(NAME, b).await, "release");
    assert!(ok(take(NAME, a, 93).await, "take a released lease"));
    assert!(!ok(take(OTHER, a, 10).await, "take b's other lease"));
    ok(store.release_lease("no-such-lease", a).await, "release");
}
