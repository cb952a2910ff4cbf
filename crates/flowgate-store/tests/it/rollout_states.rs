//! The migration that lets a rollout end `abandoned` (issue 65): SQLite rebuilds the table to
//! change its CHECK, with foreign keys on, so the test holds that a rollout and its steps come
//! through it, down and up again, as they were; and that the state is refused before it.

use flowgate_domain::ids::{AppId, ExperimentId, FlowId, RolloutId, VariantId};
use flowgate_domain::ports::RolloutStore;
use flowgate_domain::rollouts::{AppliedStep, Rollout, RolloutPlan, RolloutState};
use flowgate_testkit::revert_through;
use time::OffsetDateTime;
use uuid::Uuid;

/// The migration under test.
const MIGRATION: &str = "20261209000000";

fn at(minute: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000 + minute * 60).expect("a time")
}

fn rollout() -> Rollout {
    let id = |n: u128| Uuid::from_u128(0x7000_0000_0000_4000_8000_0000_0000_0000 + n);
    Rollout {
        id: RolloutId::from_uuid(id(1)),
        app_id: AppId::from_uuid(id(2)),
        placement: "paywall".to_owned(),
        experiment_id: ExperimentId::from_uuid(id(3)),
        control_variant: VariantId::from_uuid(id(4)),
        treatment_variant: VariantId::from_uuid(id(5)),
        from_flow: FlowId::from_uuid(id(6)),
        to_flow: FlowId::from_uuid(id(7)),
        to_version: Some(2),
        plan: RolloutPlan::default(),
        state: RolloutState::Running,
        reason: None,
        created_by: "cli".to_owned(),
        created_at: at(0),
        updated_at: at(0),
        applied: vec![AppliedStep {
            index: 0,
            share: 1.0,
            applied_at: at(0),
            revision: 7,
            figures: serde_json::Value::Null,
        }],
    }
}

backend_tests! {
    async fn the_abandoned_state_migration_keeps_rollouts_and_their_steps(db) {
        let r = rollout();
        db.store.insert_rollout(r.clone()).await.expect("insert");
        let step = AppliedStep { index: 1, share: 5.0, applied_at: at(5), revision: 8,
            figures: serde_json::json!({"verdict": "keep_running"}) };
        assert!(db.store.apply_step(r.id, step, None).await.expect("step"));
        let before = db.store.rollout(r.id).await.expect("read").expect("there");
        assert_eq!(before.applied.len(), 2);

        // Down: the state is refused by the table again; up: kept as it was.
        let reverted = revert_through(&db.store, MIGRATION).await;
        assert_eq!(reverted.last().map(String::as_str), Some(MIGRATION));
        let refused = db.store.set_rollout_state(
            r.id, (RolloutState::Running, RolloutState::Abandoned, None), at(6)).await;
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(db.store.migrate().await.expect("up").len(), reverted.len());
        assert_eq!(db.store.rollout(r.id).await.expect("read"), Some(before));
        assert!(db.store.set_rollout_state(
            r.id, (RolloutState::Running, RolloutState::Abandoned, Some("gone".into())), at(7))
            .await.expect("abandon"));
    }
}
