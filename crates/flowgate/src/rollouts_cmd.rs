//! `flowgate rollouts start|list|show|pause|resume|rollback` (D29), as `cli` in the audit log.

use flowgate_control::import::CLI_ACTOR;
use flowgate_domain::ids::{AppId, FlowId, RolloutId};
use flowgate_domain::ports::RolloutStore as _;
use flowgate_domain::rollouts::{format_duration, parse_duration, Rollout, RolloutPlan};
use flowgate_store::Store;

use crate::cli::{ExitCode, RolloutsCommand};
use crate::commands::{print_json, store_failure};
use crate::terminal::{errln, outln};
use flowgate_control::rollouts::{self, RolloutFailure, StartRequest};
use flowgate_http::rollouts::rollout_json;

/// `flowgate rollouts ...`
pub async fn rollouts(store: &Store, command: RolloutsCommand, review: bool) -> ExitCode {
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
            author,
            apply_now,
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
            start(store, request, (review, author, apply_now), json, now).await
        }
        RolloutsCommand::List { state, json } => list(store, state, json).await,
        RolloutsCommand::Show { id, json } => show_stored(store, &id, json).await,
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

/// `flowgate rollouts list [--state STATE] [--json]`.
async fn list(store: &Store, state: Option<String>, json: bool) -> ExitCode {
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

/// `flowgate rollouts show ID [--json]`.
async fn show_stored(store: &Store, id: &str, json: bool) -> ExitCode {
    let Some(id) = parse_id(id) else {
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
                flowgate_domain::text::rfc3339(s.applied_at),
                s.revision
            ),
            None => outln!("step {:>2}    {share:>5}%  pending", i + 1),
        }
    }
}

/// `rollouts start` under D35's review: with `catalog.require_review`, `--author` proposes the
/// rollout as that editor or admin, `--apply-now` starts it at once as break-glass (its comment
/// says so in the audit log), and neither is refused; without review it starts at once.
async fn start(
    store: &Store,
    mut request: StartRequest,
    (review, author, apply_now): (bool, Option<String>, bool),
    json: bool,
    now: time::OffsetDateTime,
) -> ExitCode {
    match (review, author) {
        (false, Some(_)) => {
            errln!(
                "flowgate: --author proposes a rollout for review, and catalog.require_review \
                 is off: start it without --author"
            );
            ExitCode::InvalidInput
        }
        (false, None) => shown(rollouts::start(store, request, now).await, json),
        (true, None) if apply_now => {
            request.comment = format!(
                "break-glass: started with --apply-now under catalog.require_review; {}",
                request.comment
            );
            shown(rollouts::start(store, request, now).await, json)
        }
        (true, None) => {
            errln!(
                "flowgate: catalog.require_review is on: a rollout start waits for review. \
                 --author EMAIL proposes it as that editor, for another editor or admin to \
                 approve in the console; --apply-now starts it at once (break-glass, audited)"
            );
            ExitCode::InvalidInput
        }
        (true, Some(email)) => propose(store, request, &email, json, now).await,
    }
}

/// Proposes `request` as `email`'s, who must be an editor or admin who is not disabled.
async fn propose(
    store: &Store,
    mut request: StartRequest,
    email: &str,
    json: bool,
    now: time::OffsetDateTime,
) -> ExitCode {
    request.actor = match flowgate_control::review::author(store, email).await {
        Ok(Some(author)) => author,
        Ok(None) => {
            errln!(
                "flowgate: --author {email:?} is not an editor or admin who may propose changes"
            );
            return ExitCode::InvalidInput;
        }
        Err(e) => return store_failure("the author could not be read", &e),
    };
    match flowgate_control::review::rollout::propose_start(store, request, now).await {
        Ok(record) if json => {
            print_json(&serde_json::json!({
                "change_id": record.id.to_string(), "state": record.state.as_str(),
                "author": record.author, "summary": record.summary,
            }));
            ExitCode::Success
        }
        Ok(record) => {
            outln!(
                "proposed change {} by {}: {}; another editor or admin approves it in the console",
                record.id,
                record.author,
                record.summary
            );
            ExitCode::Success
        }
        Err(e) => shown(Err(e), json),
    }
}
