//! Rollout starts under review (D35): with `catalog.require_review`, starting a rollout moves
//! users like any console change, so it waits for another editor's or admin's approval.
//!
//! A proposal is a pending change (D28) whose `start_rollout` carries the rollout's plan (an
//! optional member of the change's format 1). Approving it ([`start_reviewed`]) writes the
//! catalog change, the rollout's record with its first step and the change's decision in one
//! transaction; the plain change path refuses a `start_rollout`
//! (`ChangeFailure::RolloutOnly`), so no rollout's experiment runs without its record.

use crate::changes::{apply_change_with, preview_change, AppliedChange, ChangeWrite};
use crate::ControlStore;
use flowgate_domain::catalog::{CatalogChange, CatalogData};
use flowgate_domain::ids::{ChangeId, FlowId, RolloutId};
use flowgate_domain::people::{AuditAction, ChangeDecision, ChangeRecord};
use flowgate_domain::ports::RolloutWrite;

use flowgate_domain::rollouts::{AppliedStep, Rollout, RolloutState};
use serde_json::{json, Value};
use time::OffsetDateTime;

use crate::review::Proposal;
use crate::rollouts::{ensure_free, plan_start, RolloutFailure, StartRequest};

/// Records `request` as a pending change by `request.actor` (its author, who cannot approve
/// it), audited as `change.propose`: nothing moves until another person approves it.
pub async fn propose_start(
    store: &dyn ControlStore,
    request: StartRequest,
    now: OffsetDateTime,
) -> Result<ChangeRecord, RolloutFailure> {
    let (rollout, mut change, base) = plan_start(store, &request, now).await?;
    if let CatalogChange::StartRollout { plan, .. } = &mut change {
        *plan = Some(Box::new(rollout.plan.clone()));
    }
    let preview = preview_change(store, &change, now).await?;
    let proposal = Proposal {
        change: &change,
        base,
        summary: preview.description,
        author: &request.actor,
        comment: &request.comment,
    };
    Ok(crate::review::record(store, proposal, now).await?)
}

/// Applies an approved rollout start: `change` is the proposal's `start_rollout` with its plan,
/// `decision` the approval (by `approver`, with `comment`). The rollout is the proposal's
/// author's, from the flow its rule serves now, with the ids the proposal chose; refused while
/// another rollout of the placement is open, or when the catalog changed since `base`.
pub async fn start_reviewed(
    store: &dyn ControlStore,
    change: &CatalogChange,
    base: u64,
    approver: &str,
    comment: &str,
    decision: (ChangeId, ChangeDecision),
    now: OffsetDateTime,
) -> Result<AppliedChange, RolloutFailure> {
    let CatalogChange::StartRollout {
        app,
        placement,
        experiment,
        control,
        treatment,
        flow,
        version,
        plan: Some(plan),
        ..
    } = change
    else {
        return Err(RolloutFailure::Invalid(
            "only a proposed rollout start (a start_rollout with its plan) starts a rollout here"
                .to_owned(),
        ));
    };
    ensure_free(store, *app, placement).await?;
    let stored = store.load_catalog().await?;
    let from_flow = rule_flow(&stored, change)?;
    let author = store
        .change(decision.0)
        .await?
        .map_or_else(|| approver.to_owned(), |r| r.author);
    // The ids `plan_start` chose: the experiment's is the rollout's with its lowest bit flipped.
    let id = RolloutId::from_uuid(uuid::Uuid::from_u128(experiment.as_uuid().as_u128() ^ 1));
    let first = plan.steps.first().copied().unwrap_or(100.0);
    let rollout = Rollout {
        id,
        app_id: *app,
        placement: placement.clone(),
        experiment_id: *experiment,
        control_variant: *control,
        treatment_variant: *treatment,
        from_flow,
        to_flow: *flow,
        to_version: *version,
        plan: plan.as_ref().clone(),
        state: RolloutState::Running,
        reason: None,
        created_by: author,
        created_at: now,
        updated_at: now,
        applied: vec![AppliedStep {
            index: 0,
            share: first,
            applied_at: now,
            revision: 0,
            figures: Value::Null,
        }],
    };
    let write = ChangeWrite {
        actor: approver,
        comment,
        action: AuditAction::RolloutStep,
        detail: json!({"rollout": id.to_string(), "step": 1, "share": first,
                       "change": decision.0.to_string()}),
        decision: Some(decision),
        rollout: Some(RolloutWrite::Start(Box::new(rollout))),
    };
    Ok(apply_change_with(store, change, base, write, now).await?)
}

/// The flow the rule of a `start_rollout` serves in `stored` (the rollout's control).
fn rule_flow(stored: &CatalogData, change: &CatalogChange) -> Result<FlowId, RolloutFailure> {
    let CatalogChange::StartRollout {
        app,
        placement,
        rule,
        ..
    } = change
    else {
        return Err(RolloutFailure::Invalid("not a rollout start".to_owned()));
    };
    stored
        .workspaces
        .iter()
        .flat_map(|w| &w.apps)
        .filter(|a| a.id == *app)
        .flat_map(|a| &a.placements)
        .find(|p| &p.key == placement)
        .and_then(|p| p.rules.get(*rule))
        .and_then(|r| r.experiment.is_none().then_some(r.flow_id).flatten())
        .ok_or_else(|| {
            RolloutFailure::Invalid(format!(
                "rule {rule} of placement `{placement}` no longer serves a flow: propose the \
                 rollout again"
            ))
        })
}
