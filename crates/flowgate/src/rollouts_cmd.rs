//! `flowgate rollouts start|list|show|pause|resume|rollback` (D29), as `cli` in the audit log.

use flowgate_domain::ids::{AppId, FlowId, RolloutId};
use flowgate_domain::ports::RolloutStore as _;
use flowgate_domain::rollouts::{format_duration, parse_duration, Rollout, RolloutPlan};
use flowgate_store::import::CLI_ACTOR;
use flowgate_store::Store;

use crate::cli::{ExitCode, RolloutsCommand};
use crate::commands::{print_json, store_failure};
use crate::rollouts::{self, RolloutFailure, StartRequest};
use crate::terminal::{errln, outln};
use flowgate_http::rollouts::rollout_json;

/// `flowgate rollouts ...`
pub async fn rollouts(store: &Store, command: RolloutsCommand) -> ExitCode {
    let now = time::OffsetDateTime::now_utc();
    match command {
        RolloutsCommand::Start {
            app,
            placement,
            flow,
            version,
            steps,
            hold,
            minimum_users,
            guardrails,
            optional_guardrails,
            comment,
            json,
        } => {
            let (Ok(app), Ok(flow)) = (app.parse::<AppId>(), flow.parse::<FlowId>()) else {
                errln!("flowgate: --app and --flow are ids (hyphenated UUIDs)");
                return ExitCode::InvalidInput;
            };
            let plan = parse_duration(&hold)
                .and_then(|hold| RolloutPlan::new(steps, hold, minimum_users, guardrails))
                .and_then(|plan| plan.with_optional(optional_guardrails));
            let plan = match plan {
                Ok(plan) => plan,
                Err(e) => {
                    errln!("flowgate: {e}");
                    return ExitCode::InvalidInput;
                }
            };
            let request = StartRequest {
                app,
                placement,
                flow,
                version,
                plan,
                actor: CLI_ACTOR.to_owned(),
                comment,
            };
            shown(rollouts::start(store, request, now).await, json)
        }
        RolloutsCommand::List { state, json } => {
            let state = match state.map(|s| s.parse()).transpose() {
                Ok(state) => state,
                Err(e) => {
                    errln!("flowgate: --state: {e}");
                    return ExitCode::InvalidInput;
                }
            };
            match store.list_rollouts(state).await {
                Ok(listed) if json => {
                    print_json(&serde_json::json!(listed
                        .iter()
                        .map(rollout_json)
                        .collect::<Vec<_>>()));
                    ExitCode::Success
                }
                Ok(listed) => {
                    if listed.is_empty() {
                        outln!("no rollouts");
                    }
                    for r in &listed {
                        outln!(
                            "{}  {:<11}  {:>5}%  {}  {} -> {}",
                            r.id,
                            r.state.as_str(),
                            r.share(),
                            r.placement,
                            r.from_flow,
                            r.to_flow
                        );
                    }
                    ExitCode::Success
                }
                Err(e) => store_failure("the rollouts could not be read", &e),
            }
        }
        RolloutsCommand::Show { id, json } => {
            let Some(id) = parse_id(&id) else {
                return ExitCode::InvalidInput;
            };
            match store.rollout(id).await {
                Ok(Some(r)) => {
                    show(&r, json);
                    ExitCode::Success
                }
                Ok(None) => {
                    errln!("flowgate: no rollout {id}");
                    ExitCode::NotFound
                }
                Err(e) => store_failure("the rollout could not be read", &e),
            }
        }
        RolloutsCommand::Pause { id, comment, json } => {
            let Some(id) = parse_id(&id) else {
                return ExitCode::InvalidInput;
            };
            shown(
                rollouts::pause(store, id, CLI_ACTOR, &comment, now).await,
                json,
            )
        }
        RolloutsCommand::Resume { id, comment, json } => {
            let Some(id) = parse_id(&id) else {
                return ExitCode::InvalidInput;
            };
            shown(
                rollouts::resume(store, id, CLI_ACTOR, &comment, now).await,
                json,
            )
        }
        RolloutsCommand::Rollback { id, comment, json } => {
            let Some(id) = parse_id(&id) else {
                return ExitCode::InvalidInput;
            };
            let why = if comment.is_empty() {
                "by hand".to_owned()
            } else {
                comment
            };
            let result =
                rollouts::roll_back(store, id, CLI_ACTOR, &why, serde_json::Value::Null, now).await;
            shown(result, json)
        }
    }
}

fn parse_id(text: &str) -> Option<RolloutId> {
    let parsed = text.parse().ok();
    if parsed.is_none() {
        errln!("flowgate: {text:?} is not a rollout id (a hyphenated UUID)");
    }
    parsed
}

/// The rollout, or the failure's message and exit code.
fn shown(result: Result<Rollout, RolloutFailure>, json: bool) -> ExitCode {
    match result {
        Ok(r) => {
            if json {
                show(&r, true);
            } else {
                outln!("{}", r.id);
                errln!("rollout {} is {} at {}%", r.id, r.state, r.share());
            }
            ExitCode::Success
        }
        Err(RolloutFailure::NotFound(id)) => {
            errln!("flowgate: no rollout {id}");
            ExitCode::NotFound
        }
        Err(e) if e.is_callers() => {
            errln!("flowgate: {e}");
            ExitCode::InvalidInput
        }
        Err(e) => {
            errln!("flowgate: {e}");
            ExitCode::Failure
        }
    }
}

/// A rollout as JSON, or as lines for people.
fn show(r: &Rollout, json: bool) {
    if json {
        print_json(&rollout_json(r));
        return;
    }
    outln!("rollout    {}", r.id);
    outln!("state      {} at {}%", r.state, r.share());
    if let Some(reason) = &r.reason {
        outln!("reason     {reason}");
    }
    outln!("placement  {} of app {}", r.placement, r.app_id);
    outln!("flows      {} -> {}", r.from_flow, r.to_flow);
    outln!("experiment {}", r.experiment_id);
    outln!(
        "plan       hold {}, {} users, guardrails {}",
        format_duration(r.plan.hold_secs),
        r.plan.minimum_users,
        r.plan
            .guardrails
            .iter()
            .map(|g| if r.plan.is_optional(g) {
                format!("{g} (optional)")
            } else {
                g.clone()
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (i, share) in r.plan.steps.iter().enumerate() {
        match r.applied.iter().find(|s| s.index as usize == i) {
            Some(s) => outln!(
                "step {:>2}    {share:>5}%  applied {} (revision {})",
                i + 1,
                flowgate_http::results::rfc3339(s.applied_at),
                s.revision
            ),
            None => outln!("step {:>2}    {share:>5}%  pending", i + 1),
        }
    }
}
