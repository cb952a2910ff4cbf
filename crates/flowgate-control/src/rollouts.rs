//! Staged rollouts (D29) on the store: starting one, the scheduler's pass over the running
//! ones, and a person's pause, resume and roll back. What to do is the domain's
//! ([`flowgate_domain::rollouts::next_action`]); every catalog change goes through the one
//! write path (`crate::changes::apply_change_with`) with the rollout's record in the
//! same transaction, keyed by `(rollout, step)`: a step is applied at most once, whichever
//! process tries and however often.

use crate::changes::{apply_change_with, ChangeFailure, ChangeWrite};
use crate::results::{experiment_report, ReportError, ReportParams, ResultsSettings};
use crate::ControlStore;
use flowgate_domain::catalog::{CatalogChange, CatalogData, ExperimentStatus};
use flowgate_domain::ids::{AppId, ExperimentId, FlowId, RolloutId, VariantId};
use flowgate_domain::people::{AuditAction, NewAuditEntry};
use flowgate_domain::ports::RolloutWrite;
use flowgate_domain::ports::{ResultsSource, StoreError};
use flowgate_domain::results::ExperimentReport;
use flowgate_domain::rollouts::{
    next_action, AppliedStep, GuardrailReading, NextAction, Rollout, RolloutPlan, RolloutState,
    SCHEDULER_ACTOR,
};
use flowgate_domain::Catalog;
use serde_json::{json, Value};
use time::OffsetDateTime;

/// Why a rollout could not be started or moved. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum RolloutFailure {
    /// No rollout with this id.
    #[error("no rollout {0}")]
    NotFound(RolloutId),
    /// The rollout is not in a state this allows.
    #[error("rollout {id} is {state}: {what}")]
    WrongState {
        /// The rollout.
        id: RolloutId,
        /// Its state.
        state: RolloutState,
        /// What was asked, and what it needs.
        what: &'static str,
    },
    /// The app, placement or flow is not one a rollout can start from.
    #[error("{0}")]
    Invalid(String),
    /// The catalog change was refused (stale, invalid, the step applied meanwhile).
    #[error(transparent)]
    Change(#[from] ChangeFailure),
    /// The guardrails could not be read.
    #[error("the guardrails could not be read: {0}")]
    Report(#[from] ReportError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RolloutFailure {
    /// A stable code: `not_found`, `wrong_state`, `invalid`, the change's, `report`, `store`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not_found",
            Self::WrongState { .. } => "wrong_state",
            Self::Invalid(_) => "invalid",
            Self::Change(e) => e.code(),
            Self::Report(_) => "report",
            Self::Store(_) => "store",
        }
    }

    /// Whether the caller asked for something wrong (rather than the store failing).
    pub fn is_callers(&self) -> bool {
        !matches!(
            self,
            Self::Store(_)
                | Self::Report(ReportError::Store(_))
                | Self::Change(ChangeFailure::Store(_))
        )
    }
}

/// A rollout to start.
#[derive(Clone, Debug)]
pub struct StartRequest {
    /// The app.
    pub app: AppId,
    /// The placement's key: its first rule serving a flow (and on) is rolled.
    pub placement: String,
    /// The new flow.
    pub flow: FlowId,
    /// The version of `flow` to roll out (published or not); `None`: the one it publishes.
    pub version: Option<u32>,
    /// The plan (at least two steps: the first is applied now).
    pub plan: RolloutPlan,
    /// Who starts it (an email, `cli`).
    pub actor: String,
    /// Why, in their words.
    pub comment: String,
}

/// Starts a rollout: the placement's first rule that serves a flow and is on becomes the
/// rollout's experiment at the plan's first share, and the rollout is recorded with that step,
/// in one catalog write.
pub async fn start(
    store: &dyn ControlStore,
    request: StartRequest,
    now: OffsetDateTime,
) -> Result<Rollout, RolloutFailure> {
    let (rollout, change, base) = plan_start(store, &request, now).await?;
    let id = rollout.id;
    let write = ChangeWrite {
        actor: &request.actor,
        comment: &request.comment,
        action: AuditAction::RolloutStep,
        detail: json!({"rollout": id.to_string(), "step": 1, "share": rollout.applied[0].share}),
        decision: None,
        rollout: Some(RolloutWrite::Start(Box::new(rollout))),
    };
    apply_change_with(store, &change, base, write, now).await?;
    store.rollout(id).await?.ok_or(RolloutFailure::NotFound(id))
}

/// The rollout `request` starts and the catalog change that starts it (without its plan), on
/// the stored catalog of revision `base`; refused while another rollout of the placement is
/// open, or when the placement has no rule to roll.
pub(crate) async fn plan_start(
    store: &dyn ControlStore,
    request: &StartRequest,
    now: OffsetDateTime,
) -> Result<(Rollout, CatalogChange, u64), RolloutFailure> {
    if request.plan.steps.len() < 2 {
        return Err(RolloutFailure::Invalid(
            "a rollout has at least two steps (the last is 100): to serve the flow to everyone \
             at once, change the rule"
                .to_owned(),
        ));
    }
    ensure_free(store, request.app, &request.placement).await?;
    let stored = store.load_catalog().await?;
    let (rule, from_flow) = rule_to_roll(&stored, request.app, &request.placement)?;
    // D35: the default guardrails follow the app: the stores' figures where they report.
    let store_revenue = Catalog::build(stored.clone())
        .map(|catalog| catalog.reports_store_revenue(request.app))
        .unwrap_or(false);
    let plan = if store_revenue {
        request.plan.clone().for_store_revenue()
    } else {
        request.plan.clone()
    };
    let flow_name = stored
        .workspaces
        .iter()
        .flat_map(|w| &w.apps)
        .flat_map(|a| &a.flows)
        .find(|f| f.id == request.flow)
        .map_or_else(|| request.flow.to_string(), |f| f.name.clone());
    let id = RolloutId::new_v7(now);
    let uuid = |n: u128| uuid::Uuid::from_u128(id.as_uuid().as_u128() ^ n);
    let rollout = Rollout {
        id,
        app_id: request.app,
        placement: request.placement.clone(),
        experiment_id: ExperimentId::from_uuid(uuid(1)),
        control_variant: VariantId::from_uuid(uuid(2)),
        treatment_variant: VariantId::from_uuid(uuid(3)),
        from_flow,
        to_flow: request.flow,
        to_version: request.version,
        state: RolloutState::Running,
        reason: None,
        created_by: request.actor.clone(),
        created_at: now,
        updated_at: now,
        applied: vec![AppliedStep {
            index: 0,
            share: plan.steps[0],
            applied_at: now,
            revision: 0,
            figures: Value::Null,
        }],
        plan,
    };
    let change = CatalogChange::StartRollout {
        app: rollout.app_id,
        placement: rollout.placement.clone(),
        rule,
        experiment: rollout.experiment_id,
        name: format!("Rollout of {flow_name} ({})", short(id)),
        control: rollout.control_variant,
        treatment: rollout.treatment_variant,
        flow: rollout.to_flow,
        version: rollout.to_version,
        share: rollout.applied[0].share,
        guardrails: rollout.plan.guardrails.clone(),
        minimum_users: rollout.plan.minimum_users,
        plan: None,
    };
    Ok((rollout, change, stored.revision))
}

/// Refused while another rollout of the placement is open: one rollout at a time per placement,
/// since a second would take the placement's next rule serving a flow (another audience)
/// without saying so.
pub(crate) async fn ensure_free(
    store: &dyn ControlStore,
    app: AppId,
    placement: &str,
) -> Result<(), RolloutFailure> {
    let open = store.list_rollouts(None).await?;
    match open
        .iter()
        .find(|r| !r.state.ended() && r.app_id == app && r.placement == placement)
    {
        Some(other) => Err(RolloutFailure::Invalid(format!(
            "rollout {} of placement `{}` is {}: roll it back or let it complete first",
            other.id, other.placement, other.state
        ))),
        None => Ok(()),
    }
}

/// The first 8 hex digits of a rollout's id, as names show it.
fn short(id: RolloutId) -> String {
    id.to_string().chars().take(8).collect()
}

/// The position of the placement's first rule that serves a flow and is on, and that flow.
fn rule_to_roll(
    stored: &CatalogData,
    app: AppId,
    placement: &str,
) -> Result<(usize, FlowId), RolloutFailure> {
    let a = stored
        .workspaces
        .iter()
        .flat_map(|w| &w.apps)
        .find(|a| a.id == app)
        .ok_or_else(|| RolloutFailure::Invalid(format!("no app {app} in the catalog")))?;
    let p = a
        .placements
        .iter()
        .find(|p| p.key == placement)
        .ok_or_else(|| {
            RolloutFailure::Invalid(format!("app `{}` has no placement `{placement}`", a.name))
        })?;
    p.rules
        .iter()
        .enumerate()
        .find_map(|(i, r)| match (r.enabled, &r.experiment, r.flow_id) {
            (true, None, Some(flow)) => Some((i, flow)),
            _ => None,
        })
        .ok_or_else(|| {
            RolloutFailure::Invalid(format!(
                "placement `{placement}` has no rule that serves a flow and is on: a rollout \
                 moves such a rule to another flow"
            ))
        })
}

/// What the guardrails of `rollout` read now, over the users first exposed since its current
/// step took effect everywhere (`settle` after it was applied), with the figures to record.
pub async fn read_guardrails(
    store: &dyn ControlStore,
    reader: &dyn ResultsSource,
    settings: &ResultsSettings,
    settle: std::time::Duration,
    rollout: &Rollout,
    now: OffsetDateTime,
) -> Result<GuardrailReading, RolloutFailure> {
    let stored = store.load_catalog().await?;
    let catalog = Catalog::build(stored).map_err(|e| {
        RolloutFailure::Store(StoreError::Unstorable {
            detail: format!("the stored catalog does not build: {e}"),
        })
    })?;
    // The users first exposed since the current step took effect on every replica (`settle`
    // after it was applied: replicas read a catalog change within their refresh interval):
    // assigned under its weights, so the sample ratio check holds (earlier users keep their
    // earlier assignment, D23).
    let since = rollout
        .current()
        .map_or(rollout.created_at, |step| step.applied_at)
        + settle;
    let params = ReportParams {
        from: Some(since),
        ..ReportParams::default()
    };
    let report = experiment_report(
        &catalog,
        reader,
        &rollout.experiment_id.to_string(),
        &params,
        settings,
        now,
    )
    .await?;
    let figures = figures(&report, rollout);
    Ok(GuardrailReading::read(&report, rollout, figures))
}

/// The figures a step or a rollback records: users per variant, and per metric the new flow's
/// lift over the current one with its interval (the report's method), and the verdict.
fn figures(report: &ExperimentReport, rollout: &Rollout) -> Value {
    let users = |id: VariantId| {
        report
            .variants
            .iter()
            .find(|v| v.variant_id == id)
            .map_or(0, |v| v.users)
    };
    let metrics: Vec<Value> = report
        .metrics
        .iter()
        .map(|m| {
            let new = m
                .variants
                .iter()
                .find(|v| v.variant_id == rollout.treatment_variant);
            let mut figure = json!({"metric": m.metric});
            if let Some(v) = new {
                figure["mean"] = json!(v.mean);
                match &v.comparison {
                    Some(Ok(e)) => {
                        figure["lift"] = json!(e.lift);
                        figure["ci_low"] = json!(e.ci_low);
                        figure["ci_high"] = json!(e.ci_high);
                        figure["p_value"] = json!(e.p_value);
                    }
                    Some(Err(reason)) => figure["no_estimate"] = json!(reason.to_string()),
                    None => {}
                }
            }
            if let Some(c) = m
                .variants
                .iter()
                .find(|v| v.variant_id == rollout.control_variant)
            {
                figure["control_mean"] = json!(c.mean);
            }
            figure
        })
        .collect();
    json!({
        "users": {"current": users(rollout.control_variant), "new": users(rollout.treatment_variant)},
        "method": report.method.as_str(),
        "srm_p_value": report.srm_p_value,
        "verdict": report.decision.verdict.as_str(),
        "reasons": report.decision.reasons.iter().map(|r| r.message.clone()).collect::<Vec<_>>(),
        "metrics": metrics,
    })
}

/// What one pass did with one rollout.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Nothing to do now (why, in words).
    Waited(String),
    /// Step `index` (from 0) applied at this share.
    Stepped {
        /// The step's position.
        index: u32,
        /// Its share, in percent.
        share: f64,
    },
    /// The last step: the new flow for everyone.
    Completed,
    /// Rolled back, why.
    RolledBack(String),
    /// Paused, why.
    Paused(String),
    /// Abandoned, why: its experiment left the catalog or ended without it.
    Abandoned(String),
}

/// One pass of the scheduler over the running rollouts, oldest first: each is read and moved
/// at most one step. A rollout that fails is logged and left for the next pass.
pub async fn tick(
    store: &dyn ControlStore,
    reader: &dyn ResultsSource,
    settings: &ResultsSettings,
    settle: std::time::Duration,
    now: OffsetDateTime,
) -> Result<Vec<(RolloutId, Result<Outcome, RolloutFailure>)>, StoreError> {
    let mut running = store.list_rollouts(Some(RolloutState::Running)).await?;
    running.reverse();
    let mut done = Vec::with_capacity(running.len());
    for rollout in running {
        let outcome = advance(store, reader, settings, settle, &rollout, now).await;
        done.push((rollout.id, outcome));
    }
    Ok(done)
}

/// Reads `rollout`'s guardrails and takes what [`next_action`] says.
pub async fn advance(
    store: &dyn ControlStore,
    reader: &dyn ResultsSource,
    settings: &ResultsSettings,
    settle: std::time::Duration,
    rollout: &Rollout,
    now: OffsetDateTime,
) -> Result<Outcome, RolloutFailure> {
    // Its experiment left the catalog or ended without it: nothing to step or roll back; it
    // ends as abandoned and frees its placement (issue 65).
    if let Some(why) = orphaned(&store.load_catalog().await?, rollout) {
        abandon(store, rollout, SCHEDULER_ACTOR, &why, now).await?;
        return Ok(Outcome::Abandoned(why));
    }
    let reading = match read_guardrails(store, reader, settings, settle, rollout, now).await {
        Ok(reading) => reading,
        // Removed between the two reads: the next pass abandons it.
        Err(RolloutFailure::Report(ReportError::UnknownExperiment(_))) => {
            return Ok(Outcome::Waited(
                "its experiment left the catalog during the pass".to_owned(),
            ));
        }
        Err(e) => return Err(e),
    };
    match next_action(rollout, now, &reading) {
        NextAction::Wait { why, .. } => Ok(Outcome::Waited(why)),
        NextAction::Step { index, share } => {
            step(store, rollout, index, share, &reading, now).await?;
            Ok(Outcome::Stepped { index, share })
        }
        NextAction::Complete { index } => {
            step(store, rollout, index, 100.0, &reading, now).await?;
            Ok(Outcome::Completed)
        }
        NextAction::RollBack { why } => {
            roll_back(
                store,
                rollout.id,
                SCHEDULER_ACTOR,
                &why,
                reading.figures,
                now,
            )
            .await?;
            Ok(Outcome::RolledBack(why))
        }
        NextAction::Pause { why } => {
            pause(store, rollout.id, SCHEDULER_ACTOR, &why, now).await?;
            Ok(Outcome::Paused(why))
        }
    }
}

/// Applies step `index` at `share` (the last: the new flow's variant shipped, the rollout
/// completed), as the scheduler.
async fn step(
    store: &dyn ControlStore,
    rollout: &Rollout,
    index: u32,
    share: f64,
    reading: &GuardrailReading,
    now: OffsetDateTime,
) -> Result<(), RolloutFailure> {
    let last = share >= 100.0;
    let change = if last {
        CatalogChange::ShipVariant {
            experiment: rollout.experiment_id,
            variant: rollout.treatment_variant,
        }
    } else {
        CatalogChange::SetAllocation {
            experiment: rollout.experiment_id,
            weights: rollout.weights(share),
            coverage: None,
        }
    };
    let state = last.then(|| {
        (
            RolloutState::Running,
            RolloutState::Completed,
            Some(format!(
                "completed: every step applied, the guardrails held ({})",
                reading.reasons.join("; ")
            )),
        )
    });
    let base = store.load_catalog().await?.revision;
    let write = ChangeWrite {
        actor: SCHEDULER_ACTOR,
        comment: "",
        action: AuditAction::RolloutStep,
        detail: json!({
            "rollout": rollout.id.to_string(), "step": index + 1, "share": share,
            "figures": reading.figures,
        }),
        decision: None,
        rollout: Some(RolloutWrite::Step {
            id: rollout.id,
            step: AppliedStep {
                index,
                share,
                applied_at: now,
                revision: 0,
                figures: reading.figures.clone(),
            },
            change: state,
        }),
    };
    apply_change_with(store, &change, base, write, now).await?;
    Ok(())
}

/// Rolls the rollout back (running or paused): the current flow's variant is shipped (the
/// rule serves the old flow to everyone) and the rollout is `rolled_back` with `why`, in one
/// write. `figures` are recorded with it in the audit log.
pub async fn roll_back(
    store: &dyn ControlStore,
    id: RolloutId,
    actor: &str,
    why: &str,
    figures: Value,
    now: OffsetDateTime,
) -> Result<Rollout, RolloutFailure> {
    let rollout = store
        .rollout(id)
        .await?
        .ok_or(RolloutFailure::NotFound(id))?;
    if rollout.state.ended() {
        return Err(RolloutFailure::WrongState {
            id,
            state: rollout.state,
            what: "only a running or paused rollout rolls back",
        });
    }
    // Nothing to ship when its experiment left the catalog or ended without it: it ends as
    // abandoned instead, and the placement is free again (issue 65).
    if let Some(gone) = orphaned(&store.load_catalog().await?, &rollout) {
        return abandon(store, &rollout, actor, &format!("{why} ({gone})"), now).await;
    }
    let change = CatalogChange::ShipVariant {
        experiment: rollout.experiment_id,
        variant: rollout.control_variant,
    };
    let base = store.load_catalog().await?.revision;
    let reason = format!("rolled back by {actor}: {why}");
    let write = ChangeWrite {
        actor,
        comment: why,
        action: AuditAction::RolloutRollback,
        detail: json!({"rollout": id.to_string(), "share": rollout.share(), "figures": figures}),
        decision: None,
        rollout: Some(RolloutWrite::State {
            id,
            change: (rollout.state, RolloutState::RolledBack, Some(reason)),
        }),
    };
    apply_change_with(store, &change, base, write, now).await?;
    store.rollout(id).await?.ok_or(RolloutFailure::NotFound(id))
}

/// Pauses a running rollout (no step is taken; the experiment keeps its share), recorded in
/// the audit log as `actor`'s with `why`.
pub async fn pause(
    store: &dyn ControlStore,
    id: RolloutId,
    actor: &str,
    why: &str,
    now: OffsetDateTime,
) -> Result<Rollout, RolloutFailure> {
    let reason = format!("paused by {actor}: {why}");
    set_state(
        store,
        id,
        (RolloutState::Running, RolloutState::Paused, Some(reason)),
        "only a running rollout pauses",
        actor,
        why,
        now,
    )
    .await
}

/// Resumes a paused rollout, recorded in the audit log as `actor`'s.
pub async fn resume(
    store: &dyn ControlStore,
    id: RolloutId,
    actor: &str,
    why: &str,
    now: OffsetDateTime,
) -> Result<Rollout, RolloutFailure> {
    set_state(
        store,
        id,
        (RolloutState::Paused, RolloutState::Running, None),
        "only a paused rollout resumes",
        actor,
        why,
        now,
    )
    .await
}

/// Why `rollout` can neither step nor roll back, if it cannot: its experiment is not in
/// `stored`, or no longer running (concluded by its `ends_at`, stopped by a person).
fn orphaned(stored: &CatalogData, rollout: &Rollout) -> Option<String> {
    match stored.experiments().find(|e| e.id == rollout.experiment_id) {
        None => Some(
            "its experiment is no longer in the catalog (an import or a change replaced its \
             rule); the rule serves what the catalog says"
                .to_owned(),
        ),
        Some(e) if e.status != ExperimentStatus::Running => Some(format!(
            "its experiment is {} (concluded by its end time or stopped); the rule serves what \
             the catalog says",
            e.status.as_str()
        )),
        Some(_) => None,
    }
}

/// Ends a running or paused `rollout` as abandoned with `why`, as `actor` (audited).
pub async fn abandon(
    store: &dyn ControlStore,
    rollout: &Rollout,
    actor: &str,
    why: &str,
    now: OffsetDateTime,
) -> Result<Rollout, RolloutFailure> {
    let reason = format!("abandoned by {actor}: {why}");
    set_state(
        store,
        rollout.id,
        (rollout.state, RolloutState::Abandoned, Some(reason)),
        "only a running or paused rollout is abandoned",
        actor,
        why,
        now,
    )
    .await
}

async fn set_state(
    store: &dyn ControlStore,
    id: RolloutId,
    change: flowgate_domain::ports::StateChange,
    what: &'static str,
    actor: &str,
    why: &str,
    now: OffsetDateTime,
) -> Result<Rollout, RolloutFailure> {
    let to = change.1;
    if !store.set_rollout_state(id, change, now).await? {
        let rollout = store
            .rollout(id)
            .await?
            .ok_or(RolloutFailure::NotFound(id))?;
        return Err(RolloutFailure::WrongState {
            id,
            state: rollout.state,
            what,
        });
    }
    let action = match to {
        RolloutState::Paused => AuditAction::RolloutPause,
        RolloutState::Abandoned => AuditAction::RolloutAbandon,
        _ => AuditAction::RolloutResume,
    };
    let entry = NewAuditEntry {
        at: now,
        actor: actor.to_owned(),
        action,
        target: Some(id.to_string()),
        comment: Some(why.to_owned()).filter(|w| !w.is_empty()),
        revision_before: None,
        revision_after: None,
        detail: json!({"rollout": id.to_string()}),
    };
    if let Err(e) = store.append_audit(entry).await {
        tracing::error!(error = %e, rollout = %id, "the rollout's audit entry could not be written");
    }
    store.rollout(id).await?.ok_or(RolloutFailure::NotFound(id))
}
