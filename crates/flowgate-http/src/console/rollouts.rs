//! Staged rollouts (D29) from the console: the list, one rollout's progress with the guardrails'
//! figures read before each step, and (editors) starting one, pausing, resuming and rolling back
//! now.
//!
//! The pages call the engine `flowgate rollouts` calls, through [`Console`]: a start
//! applies the first step through the catalog's one write path, and every move is recorded in
//! the audit log as the session's actor (`rollout.step`, `rollout.pause`, `rollout.resume`,
//! `rollout.rollback`). The scheduler of `flowgate serve` takes the later steps; nothing here
//! does. A refused move leaves the rollout as it was and says why: 409 for a rollout not in a
//! state that allows it, 400 for a start the caller got wrong (quoting the value), 503 when the
//! store fails.
//!
//! [`Console`]: flowgate_control::console::Console

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use flowgate_domain::catalog::CatalogData;
use flowgate_domain::ids::{AppId, FlowId, RolloutId};
use flowgate_domain::people::{AuditAction, AuditQuery, Role};
use flowgate_domain::rollouts::{
    format_duration, parse_duration, Rollout, RolloutPlan, RolloutState, DEFAULT_GUARDRAILS,
    DEFAULT_HOLD_SECS, DEFAULT_MINIMUM_USERS, DEFAULT_STEPS, MAX_MINIMUM_USERS,
};
use maud::{html, Markup};
use serde_json::Value;

use super::forms::{comment_text, MAX_COMMENT_CHARS};
use super::pages::{csrf, layout, number, relative, when};
use super::session::Session;
use super::{
    error_page, html, posted, see_other, signed_in, store_failure, ChangeRefusal, Console, Data,
    Fields, PostedForm, RolloutMove, RolloutStart,
};

/// The navigation entry the pages belong to.
const CURRENT: &str = "/console/rollouts";
/// Rollbacks searched in the audit log for the one of a rolled back rollout.
const ROLLBACKS_SEARCHED: usize = 200;

/// The names the catalog gives apps and flows; an id where it has none (a flow removed since).
struct Names {
    apps: HashMap<AppId, String>,
    flows: HashMap<FlowId, String>,
}

impl Names {
    fn of(data: &CatalogData) -> Self {
        let apps = data.workspaces.iter().flat_map(|w| &w.apps);
        Self {
            apps: apps.clone().map(|a| (a.id, a.name.clone())).collect(),
            flows: apps
                .flat_map(|a| &a.flows)
                .map(|f| (f.id, f.name.clone()))
                .collect(),
        }
    }

    fn app(&self, id: AppId) -> String {
        self.apps
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("app {id}"))
    }

    fn flow(&self, id: FlowId) -> String {
        self.flows
            .get(&id)
            .map_or_else(|| format!("flow {id}"), |name| format!("“{name}”"))
    }
}

/// A share in percent as people read it: `1%`, `25%`, `0.5%`.
fn share(percent: f64) -> String {
    format!("{percent}%")
}

/// A rollout refused as a status: 503 when the store failed, 404 for no such rollout, 409 for
/// a rollout (or catalog) that moved or is not in a state that allows it, 400 otherwise.
fn status_of(refusal: &ChangeRefusal) -> StatusCode {
    if refusal.unavailable {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    match refusal.code.as_str() {
        "not_found" => StatusCode::NOT_FOUND,
        "wrong_state" | "stale_base" | "rollout_moved" | "already_decided" => StatusCode::CONFLICT,
        _ => StatusCode::BAD_REQUEST,
    }
}

/// The stored catalog, or the answer.
async fn stored_catalog(console: &Console, session: &Session) -> Result<CatalogData, HttpResponse> {
    console
        .backend
        .catalog()
        .await
        .map_err(|e| store_failure(session, "The catalog could not be read", &e))
}

/// `GET /console/rollouts`: every rollout, newest first.
pub(super) async fn list(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let rollouts = match console.backend.list_rollouts().await {
        Ok(rollouts) => rollouts,
        Err(e) => return store_failure(&session, "The rollouts could not be read", &e),
    };
    let data = match stored_catalog(&console, &session).await {
        Ok(data) => data,
        Err(answer) => return answer,
    };
    let names = Names::of(&data);
    let editor = session.role.allows(Role::Editor);
    let body = html! {
        p.hint {
            "A rollout moves a placement's rule to another flow in steps, each held and read on its guardrails; "
            "a guardrail significantly worse rolls it back by itself. "
            @if editor { "Start one from a flow that publishes a version." }
        }
        @if editor {
            p { a.button #start-rollout href="/console/rollouts/new" { "Start a rollout" } }
        }
        @if rollouts.is_empty() {
            p #no-rollouts { "No rollout was started yet." }
        } @else {
            div.table {
                table #rollout-list {
                    thead { tr {
                        th scope="col" { "Started" } th scope="col" { "State" } th.num scope="col" { "Share now" }
                        th scope="col" { "App / placement" } th scope="col" { "From → to" } th scope="col" { "Started by" }
                    } }
                    tbody {
                        @for r in &rollouts {
                            tr data-state=(r.state.as_str()) data-rollout=(r.id) {
                                td { a href=(format!("/console/rollouts/{}", r.id)) { (when(r.created_at)) } }
                                td { span.status.rollout-state data-state=(r.state.as_str()) { (r.state.as_str()) } }
                                td.num { (share(r.share())) }
                                td { (names.app(r.app_id)) " / " code { (r.placement) } }
                                td { (names.flow(r.from_flow)) " → " (names.flow(r.to_flow)) }
                                td { (r.created_by) }
                            }
                        }
                    }
                }
            }
        }
    };
    html(
        StatusCode::OK,
        layout(Some(&session), "Rollouts", CURRENT, body),
    )
}

/// The rollout of a path, or the answer (404 for an id that is none, 503 when the store fails).
async fn rollout_at(
    console: &Console,
    session: &Session,
    id: &str,
) -> Result<Rollout, Box<HttpResponse>> {
    let not_found = || {
        Box::new(error_page(
            session,
            StatusCode::NOT_FOUND,
            "Not found",
            &format!("There is no rollout {id:?}."),
        ))
    };
    let Ok(parsed) = id.parse::<RolloutId>() else {
        return Err(not_found());
    };
    match console.backend.rollout(parsed).await {
        Ok(Some(rollout)) => Ok(rollout),
        Ok(None) => Err(not_found()),
        Err(e) => Err(Box::new(store_failure(
            session,
            "The rollout could not be read",
            &e,
        ))),
    }
}

/// The figures the audit log recorded with a rollout's rollback (the scheduler's reading of the
/// guardrails; `null` for a person's), if they can be found.
async fn rollback_figures(console: &Console, rollout: &Rollout) -> Option<Value> {
    if rollout.state != RolloutState::RolledBack {
        return None;
    }
    let query = AuditQuery {
        since: Some(rollout.created_at),
        action: Some(AuditAction::RolloutRollback),
        limit: ROLLBACKS_SEARCHED,
        ..AuditQuery::default()
    };
    let target = rollout.id.to_string();
    match console.audit.list_audit(&query).await {
        Ok(entries) => entries
            .into_iter()
            .find(|e| e.target.as_deref() == Some(target.as_str()))
            .map(|e| e.detail["figures"].clone())
            .filter(|figures| !figures.is_null()),
        Err(e) => {
            tracing::error!(error = %e, rollout = %rollout.id, "console: the rollback's audit entry could not be read");
            None
        }
    }
}

/// A verdict of the guardrails, in words.
fn verdict_words(verdict: &str) -> &'static str {
    match verdict {
        "ship" => "Better: the new flow wins",
        "roll_back" => "Worse: roll back to the current flow",
        "keep_running" => "No significant difference yet: keep going",
        "no_decision" => "No decision: the assignment cannot be trusted",
        _ => "Unknown verdict",
    }
}

/// A figure that is a number, formatted, or `n/a`.
fn figure(value: &Value, format: impl Fn(f64) -> String) -> String {
    value.as_f64().map_or_else(|| "n/a".to_owned(), format)
}

/// The guardrails' figures recorded with a step or a rollback: users per flow, the verdict
/// with its reasons, and per metric the new flow's mean, the current flow's, the lift and its
/// interval (as percentages).
fn figures_markup(figures: &Value) -> Markup {
    let users = &figures["users"];
    let verdict = figures["verdict"].as_str().unwrap_or_default();
    let reasons: Vec<&str> = figures["reasons"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let metrics: &[Value] = figures["metrics"].as_array().map_or(&[], Vec::as_slice);
    html! {
        dl.meta.figures {
            dt { "Users" }
            dd { (figure(&users["current"], |n| number(n, 0))) " on the current flow, "
                 (figure(&users["new"], |n| number(n, 0))) " on the new one" }
            @if !verdict.is_empty() {
                dt { "Verdict" }
                dd.verdict data-verdict=(verdict) { (verdict_words(verdict)) " (" code { (verdict) } ")" }
            }
            @if let Some(method) = figures["method"].as_str() { dt { "Method" } dd { (method) } }
        }
        @if !reasons.is_empty() {
            ul.reasons { @for reason in &reasons { li { (reason) } } }
        }
        @if !metrics.is_empty() {
            div.table {
                table.guardrails {
                    thead { tr {
                        th scope="col" { "Guardrail" } th.num scope="col" { "Mean, new flow" }
                        th.num scope="col" { "Mean, current flow" } th.num scope="col" { "Lift" }
                        th.num scope="col" { "Lift 95% interval" }
                    } }
                    tbody {
                        @for m in metrics {
                            tr data-metric=(m["metric"].as_str().unwrap_or_default()) {
                                th scope="row" { (m["metric"].as_str().unwrap_or("?")) }
                                td.num { (figure(&m["mean"], |x| number(x, 4))) }
                                td.num { (figure(&m["control_mean"], |x| number(x, 4))) }
                                @if let Some(reason) = m["no_estimate"].as_str() {
                                    td.num colspan="2" { "no estimate: " (reason) }
                                } @else {
                                    td.num.lift { (figure(&m["lift"], relative)) }
                                    td.num.interval { (figure(&m["ci_low"], relative)) " – " (figure(&m["ci_high"], relative)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One rollout's page, with `message` (a refused move) above it.
fn rollout_page(
    session: &Session,
    r: &Rollout,
    names: &Names,
    rollback: Option<&Value>,
    message: Option<&ChangeRefusal>,
) -> Markup {
    let editor = session.role.allows(Role::Editor);
    let form = |action: &str, label: &str, danger: bool| {
        let id = format!("{action}-comment");
        html! {
            form.rollout-action id=(action) method="post" action=(format!("/console/rollouts/{}/{action}", r.id)) {
                (csrf(session))
                label for=(id) { "Why (kept in the audit log)" }
                textarea id=(id) name="comment" rows="2" maxlength=(MAX_COMMENT_CHARS) required {}
                @if danger {
                    button.danger type="submit" { (label) }
                } @else {
                    button type="submit" { (label) }
                }
            }
        }
    };
    let body = html! {
        @if let Some(refusal) = message {
            p.error role="alert" #refused data-code=(refusal.code) { (refusal.message) }
        }
        section.rollout-state data-state=(r.state.as_str()) {
            p #rollout-state {
                "State: " strong { (r.state.as_str()) } " · " (share(r.share())) " of users on the new flow"
            }
            @if let Some(reason) = &r.reason { p #rollout-reason { (reason) } }
        }
        dl.meta {
            dt { "App" } dd { (names.app(r.app_id)) " " code { (r.app_id) } }
            dt { "Placement" } dd { code { (r.placement) } " (its first rule serving a flow)" }
            dt { "From" } dd #from-flow { (names.flow(r.from_flow)) }
            dt { "To" } dd #to-flow {
                (names.flow(r.to_flow))
                @match r.to_version {
                    Some(n) => { ", version " (n) " (published at completion)" }
                    None => { " (the version it publishes)" }
                }
            }
            dt { "Runs as" } dd { "experiment " a href=(format!("/console/experiments/{}", r.experiment_id)) { code { (r.experiment_id) } } }
            dt { "Started by" } dd #started-by { (r.created_by) ", " (when(r.created_at)) }
            dt { "Last change" } dd { (when(r.updated_at)) }
        }
        h2 { "Plan" }
        dl.meta #plan {
            dt { "Steps" } dd { @for (i, s) in r.plan.steps.iter().enumerate() { @if i > 0 { ", " } (share(*s)) } }
            dt { "Hold" } dd #hold { (format_duration(r.plan.hold_secs)) " at least per step" }
            dt { "Minimum users" } dd #minimum-users { (r.plan.minimum_users) " on the new flow before the next step" }
            dt { "Guardrails" } dd #guardrails { @for (i, g) in r.plan.guardrails.iter().enumerate() { @if i > 0 { ", " } code { (g) } } }
        }
        h2 { "Steps" }
        div.table {
            table #steps {
                thead { tr {
                    th scope="col" { "Step" } th.num scope="col" { "Share" } th scope="col" { "State" }
                    th scope="col" { "Applied at" } th.num scope="col" { "Catalog revision" }
                } }
                tbody {
                    @for (i, s) in r.plan.steps.iter().enumerate() {
                        @let applied = r.applied.iter().find(|a| a.index as usize == i);
                        tr.step data-step=(i + 1) data-state=(if applied.is_some() { "applied" } else { "pending" }) {
                            th scope="row" { (i + 1) }
                            td.num { (share(*s)) }
                            td.step-state { @if applied.is_some() { "applied" } @else { "pending" } }
                            td { @if let Some(a) = applied { (when(a.applied_at)) } }
                            td.num { @if let Some(a) = applied { (a.revision) } }
                        }
                    }
                }
            }
        }
        @for a in r.applied.iter().filter(|a| !a.figures.is_null()) {
            section.step-figures data-step=(a.index + 1) {
                h3 { "Guardrails read before step " (a.index + 1) " (" (share(a.share)) ")" }
                (figures_markup(&a.figures))
            }
        }
        @if let Some(figures) = rollback {
            section.step-figures #rollback-figures {
                h3 { "Guardrails read at the rollback" }
                (figures_markup(figures))
            }
        }
        @if editor && !r.state.ended() {
            section #rollout-actions {
                h2 { "Act on this rollout" }
                p.hint { "Pausing keeps the current share and takes no step; rolling back serves the old flow to everyone at once and ends the rollout." }
                div.actions {
                    @if r.state == RolloutState::Running { (form("pause", "Pause", false)) }
                    @if r.state == RolloutState::Paused { (form("resume", "Resume", false)) }
                    (form("rollback", "Roll back now", true))
                }
            }
        }
        p { a href=(CURRENT) { "All rollouts" } }
    };
    layout(
        Some(session),
        &format!("Rollout to {}", names.flow(r.to_flow)),
        CURRENT,
        body,
    )
}

/// A rollout's page answering `status`, with `message` above it; the rollout and the catalog
/// read now.
async fn rollout_answer(
    console: &Console,
    session: &Session,
    id: &str,
    status: StatusCode,
    message: Option<&ChangeRefusal>,
) -> HttpResponse {
    let rollout = match rollout_at(console, session, id).await {
        Ok(rollout) => rollout,
        Err(answer) => return *answer,
    };
    let data = match stored_catalog(console, session).await {
        Ok(data) => data,
        Err(answer) => return answer,
    };
    let rollback = rollback_figures(console, &rollout).await;
    html(
        status,
        rollout_page(
            session,
            &rollout,
            &Names::of(&data),
            rollback.as_ref(),
            message,
        ),
    )
}

/// `GET /console/rollouts/{id}`: its state, plan, steps and the guardrails' figures, and
/// (editors) the forms that move it.
pub(super) async fn show(req: HttpRequest, path: web::Path<String>, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    rollout_answer(&console, &session, &path, StatusCode::OK, None).await
}

/// `POST /console/rollouts/{id}/pause|resume|rollback` (editor): pauses (no step until
/// resumed), resumes, or rolls back (the old flow for everyone, now) the rollout as the
/// session's actor, and answers 303 to its page; a refused move shows the page with why, and
/// another last segment is 404.
pub(super) async fn move_rollout(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    form: PostedForm,
    console: Data,
) -> HttpResponse {
    let (id, name) = path.into_inner();
    let (fields, session) = match posted(&console, &req, form, Role::Editor).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let Some(how) = RolloutMove::parse(&name) else {
        let message = format!("no move {name:?}: pause, resume or rollback");
        return error_page(&session, StatusCode::NOT_FOUND, "Not found", &message);
    };
    let rollout = match rollout_at(&console, &session, &id).await {
        Ok(rollout) => rollout,
        Err(answer) => return *answer,
    };
    let comment = match comment_text(fields.get("comment").unwrap_or_default()) {
        Ok(comment) => comment,
        Err(message) => {
            let refusal = ChangeRefusal {
                code: "no_comment".to_owned(),
                message,
                unavailable: false,
            };
            return rollout_answer(
                &console,
                &session,
                &id,
                StatusCode::BAD_REQUEST,
                Some(&refusal),
            )
            .await;
        }
    };
    let actor = session.actor.clone();
    match console
        .backend
        .move_rollout(rollout.id, how, actor, comment)
        .await
    {
        Ok(moved) => {
            tracing::info!(rollout = %moved.id, state = %moved.state, actor = %session.actor, "console: rollout moved");
            see_other(&format!("/console/rollouts/{}", moved.id))
        }
        Err(refusal) => {
            rollout_answer(&console, &session, &id, status_of(&refusal), Some(&refusal)).await
        }
    }
}

/// What the start form holds: the defaults, or what a refused post gave (shown again).
struct StartInput {
    /// `{app id}/{placement key}`.
    target: String,
    flow: String,
    steps: String,
    hold: String,
    minimum_users: String,
    guardrails: Vec<String>,
    other_guardrails: String,
    comment: String,
}

impl Default for StartInput {
    fn default() -> Self {
        Self {
            target: String::new(),
            flow: String::new(),
            steps: DEFAULT_STEPS
                .iter()
                .map(f64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            hold: format!("{}h", DEFAULT_HOLD_SECS / 3600),
            minimum_users: DEFAULT_MINIMUM_USERS.to_string(),
            guardrails: DEFAULT_GUARDRAILS.iter().map(|g| (*g).to_owned()).collect(),
            other_guardrails: String::new(),
            comment: String::new(),
        }
    }
}

impl StartInput {
    fn of(fields: &Fields) -> Self {
        let field = |name: &str| fields.get(name).unwrap_or_default().to_owned();
        Self {
            target: field("target"),
            flow: field("flow"),
            steps: field("steps"),
            hold: field("hold"),
            minimum_users: field("minimum_users"),
            guardrails: fields
                .0
                .iter()
                .filter(|(name, _)| name == "guardrail")
                .map(|(_, value)| value.clone())
                .collect(),
            other_guardrails: field("other_guardrails"),
            comment: field("comment"),
        }
    }
}

/// What a start asks for.
struct Start {
    app: AppId,
    placement: String,
    flow: FlowId,
    /// `None`: the version the flow publishes.
    version: Option<u32>,
    plan: RolloutPlan,
    comment: String,
}

/// What a start asks for, or what is wrong, quoting the value.
fn start_of(input: &StartInput) -> Result<Start, String> {
    let target = input.target.trim();
    let (app, placement) = target
        .split_once('/')
        .and_then(|(app, placement)| Some((app.parse::<AppId>().ok()?, placement)))
        .filter(|(_, placement)| !placement.is_empty())
        .ok_or_else(|| format!("choose the app and placement to roll, not {target:?}"))?;
    // `{flow id}` (the version it publishes) or `{flow id}@{version}`.
    let (flow, version) = match input.flow.trim().split_once('@') {
        None => (input.flow.trim(), None),
        Some((flow, version)) => (flow, Some(version)),
    };
    let refused = || {
        format!(
            "choose the new flow version: {:?} is not a flow id or one followed by @version",
            input.flow
        )
    };
    let flow = flow.parse::<FlowId>().map_err(|_| refused())?;
    let version = version
        .map(|v| v.parse::<u32>().ok().filter(|v| *v > 0).ok_or_else(refused))
        .transpose()?;
    let steps = input
        .steps
        .split(',')
        .map(|s| s.trim().parse::<f64>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            format!(
                "the steps are shares in percent separated by commas (1,5,25,50,100), not {:?}",
                input.steps
            )
        })?;
    let hold = parse_duration(&input.hold).map_err(|e| format!("the hold: {e}"))?;
    let minimum_users = input.minimum_users.trim().parse::<u64>().map_err(|_| {
        format!(
            "minimum users is a whole number, not {:?}",
            input.minimum_users
        )
    })?;
    let mut guardrails: Vec<String> = input.guardrails.clone();
    guardrails.extend(
        input
            .other_guardrails
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_owned),
    );
    let plan =
        RolloutPlan::new(steps, hold, minimum_users, guardrails).map_err(|e| e.to_string())?;
    let comment = comment_text(&input.comment)?;
    Ok(Start {
        app,
        placement: placement.to_owned(),
        flow,
        version,
        plan,
        comment,
    })
}

/// A placement the start form offers: its value (`{app id}/{key}`), its key, and the name of
/// the flow its rolled rule serves.
struct Target<'a> {
    value: String,
    key: &'a str,
    serves: String,
}

/// The start form, filled with `input`, with `message` (a refused start) above it. The
/// placements offered are those with a rule that serves a flow and is on (the rule a rollout
/// moves), then every version of every flow, newest first, each under its app: the published
/// one by the flow's id, the others as `{flow id}@{version}`.
fn start_page(
    session: &Session,
    data: &CatalogData,
    input: &StartInput,
    message: Option<&str>,
) -> Markup {
    let apps: Vec<_> = data.workspaces.iter().flat_map(|w| &w.apps).collect();
    let flow_names: HashMap<FlowId, &str> = apps
        .iter()
        .flat_map(|a| &a.flows)
        .map(|f| (f.id, f.name.as_str()))
        .collect();
    // Per app, each placement with the flow of the rule a rollout would move (as the engine
    // picks it: the first rule that serves a flow and is on).
    let mut targets: Vec<(&str, Vec<Target<'_>>)> = Vec::new();
    for a in &apps {
        let placements: Vec<_> =
            a.placements
                .iter()
                .filter_map(|p| {
                    let flow = p.rules.iter().find_map(|r| {
                        match (r.enabled, &r.experiment, r.flow_id) {
                            (true, None, Some(flow)) => Some(flow),
                            _ => None,
                        }
                    })?;
                    let serves = flow_names
                        .get(&flow)
                        .map_or_else(|| flow.to_string(), |n| (*n).to_owned());
                    Some(Target {
                        value: format!("{}/{}", a.id, p.key),
                        key: &p.key,
                        serves,
                    })
                })
                .collect();
        if !placements.is_empty() {
            targets.push((a.name.as_str(), placements));
        }
    }
    let chosen_guardrail = |g: &str| input.guardrails.iter().any(|c| c == g);
    let body = html! {
        @if let Some(message) = message {
            p.error role="alert" #refused { (message) }
        }
        p.hint {
            "The placement's first rule that serves a flow (and is on) becomes an experiment: the current flow against the new one, "
            "at the first step's share at once. The scheduler of " code { "flowgate serve" } " takes each next step once the step was held "
            "and enough users had the new flow, and rolls back by itself when a guardrail is significantly worse."
        }
        @if targets.is_empty() {
            p #no-target { "No placement has a rule that serves a flow and is on: a rollout moves such a rule to another flow." }
        } @else {
            form #start-rollout method="post" action=(CURRENT) {
                (csrf(session))
                label for="target" { "App and placement" }
                select #target name="target" required {
                    @for (app, placements) in &targets {
                        optgroup label=(app) {
                            @for t in placements {
                                option value=(t.value) selected[t.value == input.target] { (t.key) " (serves “" (t.serves) "”)" }
                            }
                        }
                    }
                }
                label for="flow" { "New flow version (the current flow's next version, or another flow)" }
                select #flow name="flow" required {
                    @for a in &apps {
                        @if a.flows.iter().any(|f| !f.versions.is_empty()) {
                            optgroup label=(a.name) {
                                @for f in &a.flows {
                                    @for v in f.versions.iter().rev() {
                                        @let published = f.published_version == Some(v.version);
                                        @let value = if published { f.id.to_string() } else { format!("{}@{}", f.id, v.version) };
                                        option selected[value == input.flow] value=(value) {
                                            (f.name) ", version " (v.version) @if published { " (published)" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                label for="steps" { "Steps: the share of users on the new flow, in percent" }
                input #steps name="steps" value=(input.steps) required;
                label for="hold" { "Hold: each step at least (90s, 15m, 24h, 7d)" }
                input #hold name="hold" value=(input.hold) required;
                label for="minimum-users" { "Minimum users on the new flow before the next step" }
                input #minimum-users type="number" min="1" max=(MAX_MINIMUM_USERS) step="1" name="minimum_users" value=(input.minimum_users) required;
                fieldset.guardrails {
                    legend { "Guardrails: metrics that must not get significantly worse (none chosen: these three)" }
                    @for g in DEFAULT_GUARDRAILS {
                        @let id = format!("guardrail-{g}");
                        div.check {
                            input id=(id) type="checkbox" name="guardrail" value=(g) checked[chosen_guardrail(g)];
                            label for=(id) { code { (g) } }
                        }
                    }
                    label for="other-guardrails" { "Other metrics, separated by commas" }
                    input #other-guardrails name="other_guardrails" value=(input.other_guardrails);
                }
                label for="comment" { "Why (kept in the audit log)" }
                textarea #comment name="comment" rows="3" maxlength=(MAX_COMMENT_CHARS) required { (input.comment) }
                button type="submit" { "Start the rollout" }
            }
        }
    };
    layout(Some(session), "Start a rollout", CURRENT, body)
}

/// `GET /console/rollouts/new` (editor): the start form with the plan's defaults.
pub(super) async fn new_rollout(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Editor).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let data = match stored_catalog(&console, &session).await {
        Ok(data) => data,
        Err(answer) => return answer,
    };
    html(
        StatusCode::OK,
        start_page(&session, &data, &StartInput::default(), None),
    )
}

/// `POST /console/rollouts` (editor): starts the rollout and answers 303 to its page; a refused
/// start shows the form again with why.
pub(super) async fn start(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Editor).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let input = StartInput::of(&fields);
    let refused = |data: &CatalogData, status: StatusCode, message: &str| {
        html(status, start_page(&session, data, &input, Some(message)))
    };
    let data = match stored_catalog(&console, &session).await {
        Ok(data) => data,
        Err(answer) => return answer,
    };
    let Start {
        app,
        placement,
        flow,
        version,
        plan,
        comment,
    } = match start_of(&input) {
        Ok(start) => start,
        Err(message) => return refused(&data, StatusCode::BAD_REQUEST, &message),
    };
    let start = RolloutStart {
        app,
        placement,
        flow,
        version,
        plan,
    };
    // D35: with review, a rollout start moves users like any change: it waits for another
    // editor's or admin's approval on the changes page.
    if console.require_review {
        return match console
            .backend
            .propose_rollout(start, session.actor.clone(), comment)
            .await
        {
            Ok(id) => {
                tracing::info!(change = %id, actor = %session.actor, "console: rollout proposed");
                see_other(&format!("/console/changes/{id}"))
            }
            Err(refusal) => refused(&data, status_of(&refusal), &refusal.message),
        };
    }
    match console
        .backend
        .start_rollout(start, session.actor.clone(), comment)
        .await
    {
        Ok(rollout) => {
            tracing::info!(rollout = %rollout.id, actor = %session.actor, "console: rollout started");
            see_other(&format!("/console/rollouts/{}", rollout.id))
        }
        Err(refusal) => refused(&data, status_of(&refusal), &refusal.message),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{figures_markup, start_of, StartInput};

    /// Issue 65: the form's minimum users are refused beyond what the catalog file accepts
    /// (99999999999 was written into the catalog, whose export then did not import), with the
    /// value and the range; the most it accepts starts.
    #[test]
    fn a_start_waits_for_at_most_the_users_a_catalog_file_holds() {
        let input = |minimum: &str| StartInput {
            target: "20000000-0000-4000-8000-000000000001/onboarding".to_owned(),
            flow: "40000000-0000-4000-8000-000000000001".to_owned(),
            minimum_users: minimum.to_owned(),
            comment: "a new paywall".to_owned(),
            ..StartInput::default()
        };
        for refused in ["99999999999", "4294967296", "0"] {
            let message = start_of(&input(refused)).err().unwrap_or_default();
            assert_eq!(
                message,
                format!("minimum users must be from 1 to 4294967295, not {refused}")
            );
        }
        let most = start_of(&input("4294967295")).map(|start| start.plan.minimum_users);
        assert_eq!(most, Ok(4_294_967_295));
    }

    #[test]
    fn figures_read_as_a_table_with_percentages_and_stay_text() {
        let figures = json!({
            "users": {"current": 480, "new": 21},
            "method": "sequential",
            "verdict": "roll_back",
            "reasons": ["purchase_complete is worse <b>now</b>"],
            "metrics": [
                {"metric": "purchase_complete", "mean": 0.05, "control_mean": 0.6,
                 "lift": -0.9167, "ci_low": -0.98, "ci_high": -0.85},
                {"metric": "flow_complete", "mean": 0.01, "control_mean": 0.5,
                 "lift": -0.98, "ci_low": -1.023, "ci_high": -0.679},
                {"metric": "revenue", "no_estimate": "no variance"},
            ],
        });
        let page = figures_markup(&figures).into_string();
        for part in [
            "480 on the current flow",
            "21 on the new one",
            "Worse: roll back to the current flow",
            "0.0500",
            "0.6000",
            "-91.67%",
            "-98.00% – -85.00%",
            // Issue 65: "-102.3%" is no figure a conversion can have; people read -100%.
            "-100.00% – -67.90%",
            "no estimate: no variance",
            "is worse &lt;b&gt;now&lt;/b&gt;",
        ] {
            assert!(page.contains(part), "{part} in {page}");
        }
        assert!(!page.contains("<b>"));
        assert!(!page.contains("-102.30%"), "{page}");
    }
}
