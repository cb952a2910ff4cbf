//! Staged rollouts (D29) as the admin API, the console and `--json` show them.

use flowgate_domain::rollouts::Rollout;
use serde_json::{json, Value};

use flowgate_domain::text::rfc3339;

/// A rollout as JSON (D29): its `state`, its share now, its plan, and each step's `share`,
/// `state` (`pending`, `applied`), when it was applied, the catalog revision it left and the
/// guardrails' figures read before it.
pub fn rollout_json(r: &Rollout) -> Value {
    let steps: Vec<Value> = r
        .plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, share)| {
            let applied = r.applied.iter().find(|s| s.index as usize == i);
            json!({
                "step": i + 1,
                "share": share,
                "state": if applied.is_some() { "applied" } else { "pending" },
                "applied_at": applied.map(|s| rfc3339(s.applied_at)),
                "revision": applied.map(|s| s.revision),
                "figures": applied.map_or(Value::Null, |s| s.figures.clone()),
            })
        })
        .collect();
    json!({
        "id": r.id.to_string(),
        "app_id": r.app_id.to_string(),
        "placement": r.placement,
        "experiment_id": r.experiment_id.to_string(),
        "from_flow": r.from_flow.to_string(),
        "to_flow": r.to_flow.to_string(),
        "to_version": r.to_version,
        "state": r.state.as_str(),
        "reason": r.reason,
        "share": r.share(),
        "plan": {
            "steps": r.plan.steps, "hold_seconds": r.plan.hold_secs,
            "minimum_users": r.plan.minimum_users, "guardrails": r.plan.guardrails,
            "optional_guardrails": r.plan.optional_guardrails,
        },
        "created_by": r.created_by,
        "created_at": rfc3339(r.created_at),
        "updated_at": rfc3339(r.updated_at),
        "steps": steps,
    })
}
