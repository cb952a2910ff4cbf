//! The console's pages (D24), as maud templates: checked when the crate compiles, and escaping
//! everything they insert. The one exception is a chart: SVG that plotters drew, with its text
//! escaped by plotters ([`super::charts`]).

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use flowgate_domain::catalog::{CatalogData, ExperimentData, ExperimentStatus, PlacementData};
use flowgate_domain::explain::{Reason, Step};
use flowgate_domain::ids::{ExperimentId, WorkspaceId};
use flowgate_domain::keys::{KeyRecord, KeyType};
use flowgate_domain::people::Role;
use flowgate_domain::results::{ExperimentReport, Method, MetricKind, MetricReport};
use flowgate_domain::Catalog;
use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::session::Session;
use super::{charts, CreatedKey, ImportRecord, Preview, PreviewError};
use crate::explain::Explained;
use crate::results::{metrics_by_role, verdict_words, MetricRole};
use flowgate_control::results::Listed;

/// The pages of the navigation: path, label and the role that sees it.
const NAVIGATION: [(&str, &str, Role); 11] = [
    ("/console/experiments", "Experiments", Role::Viewer),
    ("/console/rollouts", "Rollouts", Role::Viewer),
    ("/console/catalog", "Catalog", Role::Viewer),
    ("/console/explain", "Explain", Role::Viewer),
    ("/console/preview", "Change preview", Role::Viewer),
    ("/console/history", "Import history", Role::Viewer),
    ("/console/keys", "SDK keys", Role::Viewer),
    ("/console/changes", "Changes", Role::Viewer),
    ("/console/audit", "Audit log", Role::Viewer),
    ("/console/sessions", "Sessions", Role::Viewer),
    ("/console/people", "People", Role::Admin),
];

/// The page around `body`: the navigation and the sign-out form when signed in.
pub(super) fn layout(
    session: Option<&Session>,
    title: &str,
    current: &str,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · flowgate console" }
                link rel="stylesheet" href="/console/style.css";
            }
            body {
                a.skip href="#main" { "Skip to the content" }
                header {
                    span.brand { "flowgate console" }
                    @if let Some(session) = session {
                        nav aria-label="Console" {
                            ul {
                                @for (path, label, _) in NAVIGATION.iter().filter(|(_, _, role)| session.role.allows(*role)) {
                                    li {
                                        @if *path == current {
                                            a href=(path) aria-current="page" { (label) }
                                        } @else {
                                            a href=(path) { (label) }
                                        }
                                    }
                                }
                            }
                        }
                        span.who { (session.actor) " (" (session.role) ")" }
                        form.sign-out method="post" action="/console/sign-out" {
                            input type="hidden" name="csrf" value=(session.csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main #main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// The hidden CSRF field of a session's forms.
pub(super) fn csrf(session: &Session) -> Markup {
    html! { input type="hidden" name="csrf" value=(session.csrf); }
}

/// A time for people: UTC to the second.
pub(super) fn when(t: time::OffsetDateTime) -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    t.to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_default()
}

/// A share as a percentage with two decimals.
pub(super) fn percent(share: f64) -> String {
    if share.is_finite() {
        format!("{:.2}%", share * 100.0)
    } else {
        "n/a".to_owned()
    }
}

/// A relative figure (a lift or an interval's end) as [`percent`], clamped at -100% where no
/// non-negative metric can fall (D35: the JSON keeps gbstats' figures, people read these).
pub(super) fn relative(x: f64) -> String {
    percent(x.max(-1.0))
}

/// A number, or `n/a` when not finite.
pub(super) fn number(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        "n/a".to_owned()
    }
}

/// A p-value: four decimals, or two significant digits below 0.0001.
fn p_value(p: f64) -> String {
    if p.is_finite() && p > 0.0 && p < 1e-4 {
        format!("{p:.1e}")
    } else {
        number(p, 4)
    }
}

/// How people may sign in, as the sign-in page offers it.
#[derive(Clone, Debug)]
pub(super) struct SignInMethods {
    /// The admin token's break-glass form (`console.admin_token_sign_in`).
    pub admin_token: bool,
    /// The OpenID provider's name, when people may sign in there (`[console.oidc]`).
    pub oidc: Option<String>,
}

/// The sign-in page, its forms carrying `token`, with `message` when a try failed: an email
/// and password, and the admin token when it may sign in.
pub(super) fn sign_in(token: &str, methods: &SignInMethods, message: Option<&str>) -> Markup {
    let body = html! {
        @if let Some(message) = message {
            p.error role="alert" { (message) }
        }
        @if let Some(provider) = &methods.oidc {
            p { a #oidc-sign-in .button href="/console/oidc/start" { "Sign in with " (provider) } }
            p.hint { "Or with an email and password:" }
        }
        form #password-sign-in method="post" action="/console/sign-in" {
            input type="hidden" name="csrf" value=(token);
            label for="email" { "Email" }
            input #email type="email" name="email" autocomplete="username" required autofocus;
            label for="password" { "Password" }
            input #password type="password" name="password" autocomplete="current-password" required;
            button type="submit" { "Sign in" }
        }
        p.hint {
            "An admin adds people with " code { "flowgate users add EMAIL --role ROLE" }
            ", which prints a link to set a password."
        }
        @if methods.admin_token {
            details {
                summary { "Sign in with the admin token (break glass)" }
                form #sign-in method="post" action="/console/sign-in" {
                    input type="hidden" name="csrf" value=(token);
                    label for="token" { "Admin token" }
                    input #token type="password" name="token" autocomplete="off" required;
                    button type="submit" { "Sign in with the token" }
                }
                p.hint {
                    "The token is the server's " code { "admin.token" } " setting; the audit \
                     log records its use as " code { "admin-token" } "."
                }
            }
        }
    };
    layout(None, "Sign in", "", body)
}

/// The OpenID callback's answer: signed in, moving on to the console. A page, not a redirect:
/// the session cookie (`SameSite=Strict`) is not sent on a redirect chain that began on the
/// provider's site, but is on this page's own navigation.
pub(super) fn signed_in_elsewhere() -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content="0; url=/console/experiments";
                title { "Signed in · flowgate console" }
                link rel="stylesheet" href="/console/style.css";
            }
            body {
                main #main {
                    h1 { "Signed in" }
                    p { a #continue href="/console/experiments" { "Continue to the console" } }
                }
            }
        }
    }
}

/// A signed-in page that reports a failure.
pub(super) fn error(session: &Session, title: &str, message: &str) -> Markup {
    layout(
        Some(session),
        title,
        "",
        html! { p.error role="alert" { (message) } },
    )
}

/// A failure before a session is known.
pub(super) fn plain_error(title: &str, message: &str) -> Markup {
    layout(
        None,
        title,
        "",
        html! { p.error role="alert" { (message) } },
    )
}

/// The experiments: app, placement, status, variants, exposed users.
pub(super) fn experiments(
    session: &Session,
    listed: &[Listed<'_>],
    exposed: &BTreeMap<ExperimentId, u64>,
) -> Markup {
    let body = html! {
        @if listed.is_empty() {
            p { "The catalog has no experiment." }
        } @else {
            div.table {
                table #experiments {
                    thead { tr {
                        th scope="col" { "Experiment" } th scope="col" { "App" }
                        th scope="col" { "Placement" } th scope="col" { "Status" }
                        th scope="col" { "Variants" } th.num scope="col" { "Exposed users" }
                    } }
                    tbody {
                        @for l in listed {
                            tr {
                                td { a href={ "/console/experiments/" (l.experiment.id()) } { (l.experiment.name()) } }
                                td { (l.app.name()) }
                                td { code { (l.placement) } }
                                td {
                                    span.status { (l.experiment.status().as_str()) }
                                    @if let Some(at) = l.experiment.starts_at().filter(|_| l.experiment.status() == ExperimentStatus::Draft) {
                                        br; small.schedule { "starts " (when(at)) }
                                    }
                                    @if let Some(at) = l.experiment.ends_at().filter(|_| l.experiment.status() != ExperimentStatus::Concluded) {
                                        br; small.schedule { "ends " (when(at)) }
                                    }
                                }
                                td {
                                    @for (i, v) in l.experiment.variants().iter().enumerate() {
                                        @if i > 0 { ", " }
                                        (v.name()) " (" (percent(v.weight())) ")"
                                    }
                                }
                                td.num { (exposed.get(&l.experiment.id()).copied().unwrap_or(0)) }
                            }
                        }
                    }
                }
            }
        }
    };
    layout(Some(session), "Experiments", "/console/experiments", body)
}

/// A chart with its caption and legend.
fn figure(id: &str, caption: &str, svg: &str, legend: &[(String, &'static str)]) -> Markup {
    html! {
        figure #(id) .chart {
            (PreEscaped(svg))
            figcaption {
                (caption)
                ul.legend {
                    @for (name, colour) in legend {
                        li {
                            svg width="12" height="12" aria-hidden="true" { rect width="12" height="12" fill=(colour) {} }
                            " " (name)
                        }
                    }
                }
            }
        }
    }
}

/// How a metric's value reads: a conversion as a percentage, a mean with two decimals.
fn value(kind: MetricKind, x: f64, currency: &str) -> String {
    match kind {
        MetricKind::Conversion => percent(x),
        _ => format!("{} {currency}", number(x, 2)),
    }
}

/// The name of a method (D27) for people: "sequential" or "fixed horizon".
fn method_name(method: Method) -> &'static str {
    match method {
        Method::Sequential(_) => "sequential",
        _ => "fixed horizon",
    }
}

/// What a method's intervals are valid for (D27).
fn method_validity(method: Method) -> &'static str {
    match method {
        Method::Sequential(_) => "valid however often you read this report",
        _ => "valid for one look at a horizon set in advance",
    }
}

/// The method the experiment's analysis settings choose.
fn setting_method(report: &ExperimentReport) -> Method {
    if report.analysis.sequential {
        Method::Sequential(Default::default())
    } else {
        Method::FixedHorizon
    }
}

/// Whether the report's method is the experiment's setting (not a `method=` of this report).
fn method_is_setting(report: &ExperimentReport) -> bool {
    report.method.as_str() == setting_method(report).as_str()
}

/// The verdict (D27) in words with its reasons, and what the intervals are from.
fn verdict(report: &ExperimentReport) -> Markup {
    let decision = &report.decision;
    html! {
        section #verdict .verdict data-verdict=(decision.verdict.as_str()) aria-labelledby="verdict-heading" {
            h2 #verdict-heading { span.kicker { "Verdict: " } span.words { (verdict_words(report)) } }
            @if !decision.reasons.is_empty() {
                ul.reasons {
                    @for r in &decision.reasons {
                        li data-code=(r.code) { (r.message) }
                    }
                }
            }
            p #method .method data-method=(report.method.as_str()) {
                "Intervals and p-values are " strong { (method_name(report.method)) } ": "
                (method_validity(report.method)) "."
                @if !method_is_setting(report) {
                    " Chosen for this report; the experiment's setting is " (method_name(setting_method(report))) "."
                }
                " A verdict needs at least " (report.analysis.minimum_users) " users per variant."
            }
        }
    }
}

/// One metric: its chart of means with intervals, its chart of lifts with the method's
/// intervals, and its table; `role` is its part in the decision (D27).
fn metric(report: &ExperimentReport, m: &MetricReport, role: MetricRole, index: usize) -> Markup {
    let names: Vec<&str> = m
        .variants
        .iter()
        .map(|v| {
            report
                .variants
                .iter()
                .find(|r| r.variant_id == v.variant_id)
                .map_or("?", |r| r.name.as_str())
        })
        .collect();
    let svg = charts::means(m.kind, &m.metric, &names, &charts::mean_points(m));
    let legend: Vec<(String, &'static str)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| ((*n).to_owned(), charts::colour(i)))
        .collect();
    let caption = format!(
        "{}: mean per user of each variant, with its 95% confidence interval",
        m.metric
    );
    let method = method_name(report.method);
    let comparisons: Vec<_> = m.variants.iter().map(|v| v.comparison.as_ref()).collect();
    let lifts = charts::lift_points(&comparisons);
    let lift_legend: Vec<(String, &'static str)> = lifts
        .iter()
        .map(|p| {
            (
                names.get(p.0).copied().unwrap_or("?").to_owned(),
                charts::colour(p.0),
            )
        })
        .collect();
    let lift_caption = format!(
        "{}: lift of each treatment over {}, with its 95% interval ({method}: {}); the line is at 0, no difference",
        m.metric,
        names.first().copied().unwrap_or("the control"),
        method_validity(report.method),
    );
    html! {
        section.metric data-role=(role.as_str()) data-metric=(m.metric) aria-labelledby={ "metric-" (index) } {
            h3 #{ "metric-" (index) } {
                (m.metric) " " span.kind { "(" (m.kind.as_str()) ")" }
                @match role {
                    MetricRole::Primary => { " " span.role { "primary metric" } }
                    MetricRole::Guardrail => { " " span.role { "guardrail" } }
                    MetricRole::Other => {}
                }
            }
            (figure(&format!("metric-chart-{index}"), &caption, &svg, &legend))
            @if lifts.is_empty() {
                p.hint.no-lift { "No lift to draw: no treatment has an estimate (the table says why)." }
            } @else {
                (figure(
                    &format!("lift-chart-{index}"),
                    &lift_caption,
                    &charts::lifts(&m.metric, method, &names, &lifts),
                    &lift_legend,
                ))
            }
            div.table {
                table {
                    thead { tr {
                        th scope="col" { "Variant" } th.num scope="col" { "Users" }
                        th.num scope="col" { "Mean" } th.num scope="col" { "95% interval" }
                        th.num scope="col" { "Lift" } th.num.lift-interval scope="col" { "Lift 95% CI (" (method) ")" }
                        th.num scope="col" { "Chance to win" } th.num scope="col" { "p-value" }
                    } }
                    tbody {
                        @for (v, name) in m.variants.iter().zip(&names) {
                            tr {
                                th scope="row" { (name) }
                                td.num { (v.sums.users) }
                                td.num {
                                    @match v.sums.computable(m.kind) {
                                        Ok(()) => { (value(m.kind, v.mean, &report.currency)) }
                                        Err(no) => { "n/a (" (no.code()) ")" }
                                    }
                                }
                                td.num {
                                    @match v.sums.mean_interval(m.kind) {
                                        Some((low, high)) => { (value(m.kind, low, &report.currency)) " – " (value(m.kind, high, &report.currency)) }
                                        None => { "n/a" }
                                    }
                                }
                                @match &v.comparison {
                                    None => { td.num colspan="4" { "control" } }
                                    Some(Err(reason)) => { td.num colspan="4" { "no estimate: " (reason) } }
                                    Some(Ok(e)) => {
                                        td.num { (relative(e.lift)) }
                                        td.num { (relative(e.ci_low)) " – " (relative(e.ci_high)) }
                                        td.num.chance { (percent(e.chance_to_win)) }
                                        td.num { (p_value(e.p_value)) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One experiment's results: the verdict first (D27) with the action it recommends (D35), then
/// exposures over time, warnings in words, each metric (the primary metric first, then the
/// guardrails), and the other change forms below the report.
pub(super) fn experiment(
    session: &Session,
    report: &ExperimentReport,
    from: &str,
    to: &str,
    (verdict_action, change_forms): (Markup, Markup),
) -> Markup {
    let legend: Vec<(String, &'static str)> = report
        .variants
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.clone(), charts::colour(i)))
        .collect();
    let setting = method_is_setting(report);
    let chosen = |method: &str| !setting && report.method.as_str() == method;
    let body = html! {
        (verdict(report))
        (verdict_action)
        p.meta {
            "App " code { (report.app_id) } " · status " span.status { (report.status.as_str()) }
            " · events from " (when(report.from)) " to " (when(report.to))
        }
        form.window method="get" action={ "/console/experiments/" (report.experiment_id) } {
            label for="from" { "Users first exposed from (RFC 3339)" }
            input #from name="from" value=(from) placeholder="2026-11-01T00:00:00Z";
            label for="to" { "Events up to" }
            input #to name="to" value=(to) placeholder="now";
            label for="method-choice" { "Method of the intervals" }
            select #method-choice name="method" {
                option value="" selected[setting] {
                    "experiment's setting (" (method_name(setting_method(report))) ")"
                }
                option value="sequential" selected[chosen("sequential")] { "sequential" }
                option value="fixed" selected[chosen("fixed_horizon")] { "fixed horizon" }
            }
            button type="submit" { "Show" }
        }
        @if report.warnings.is_empty() {
            p.ok role="status" { "No warning: the variants' shares of users match their weights (SRM p-value " (p_value(report.srm_p_value)) ")." }
        }
        @for w in &report.warnings {
            p.warning role="status" data-code=(w.code) { strong { "Warning: " } (w.message) }
        }
        dl.figures {
            dt { "Exposed users" } dd #exposed-users { (report.exposed_users) }
            dt { "Users exposed to more than one variant" } dd { (report.multiple_exposures) }
            dt { "Sample ratio mismatch p-value" } dd { (p_value(report.srm_p_value)) }
        }
        h2 { "Exposed users" }
        div.table {
            table #variants {
                thead { tr {
                    th scope="col" { "Variant" } th.num scope="col" { "Weight" }
                    th.num scope="col" { "Users" } th.num scope="col" { "Share" }
                } }
                tbody {
                    @for v in &report.variants {
                        tr {
                            th scope="row" { (v.name) }
                            td.num { (percent(v.weight)) }
                            td.num { (v.users) }
                            td.num {
                                @if report.exposed_users > 0 {
                                    (percent(v.users as f64 / report.exposed_users as f64))
                                } @else { "n/a" }
                            }
                        }
                    }
                }
            }
        }
        @if report.daily.is_empty() {
            p { "No user has been exposed yet." }
        } @else {
            (figure(
                "exposure-chart",
                "Cumulative exposed users per variant, by day of first exposure (UTC)",
                &{
                    let (days, series) = charts::cumulative_exposures(report);
                    charts::exposures(&days, &series)
                },
                &legend,
            ))
        }
        h2 { "Metrics" }
        @for (i, (m, role)) in metrics_by_role(report).into_iter().enumerate() {
            (metric(report, m, role, i))
        }
        (change_forms)
    };
    layout(Some(session), &report.name, "/console/experiments", body)
}

/// A rule's audience: its JSON, or "everyone".
fn audience(audience: Option<&serde_json::Value>) -> Markup {
    match audience {
        Some(a) if a.as_object().is_none_or(|o| !o.is_empty()) => html! { code.json { (a) } },
        _ => html! { "everyone" },
    }
}

/// An experiment of the catalog page.
fn catalog_experiment(
    e: &ExperimentData,
    flow_name: &dyn Fn(Option<flowgate_domain::ids::FlowId>) -> String,
) -> Markup {
    html! {
        div.experiment {
            "experiment " a href={ "/console/experiments/" (e.id) } { (e.name) }
            " · " span.status { (e.status.as_str()) }
            @if e.sticky { " · sticky, bucket version " (e.bucket_version) ", minimum " (e.min_bucket_version) }
            @if let Some(coverage) = e.coverage { " · coverage " (percent(coverage)) }
            @let total: f64 = e.variants.iter().map(|v| v.weight).sum();
            ul {
                @for v in &e.variants {
                    li {
                        (v.name) " (weight " (v.weight)
                        @if total > 0.0 { ", " (percent(v.weight / total)) }
                        "): " (flow_name(v.flow_id))
                    }
                }
            }
        }
    }
}

/// A placement of the catalog page, its rules in order.
fn catalog_placement(
    app: flowgate_domain::ids::AppId,
    p: &PlacementData,
    flow_name: &dyn Fn(Option<flowgate_domain::ids::FlowId>) -> String,
    editor: bool,
) -> Markup {
    html! {
        li.placement {
            code { (p.key) } " · default: " (flow_name(p.default_flow_id))
            @if p.rules.is_empty() {
                " · no rule"
            } @else {
                ol.rules start="0" {
                    @for (i, r) in p.rules.iter().enumerate() {
                        li.off[!r.enabled] {
                            @if !r.enabled { strong { "off: " } }
                            "audience " (audience(r.audience.as_ref())) " → "
                            @if let Some(e) = &r.experiment {
                                (catalog_experiment(e, flow_name))
                            } @else {
                                (flow_name(r.flow_id))
                            }
                            @if editor {
                                form.inline.rule-switch method="get" action="/console/changes/new" {
                                    input type="hidden" name="kind" value="rule";
                                    input type="hidden" name="app" value=(app);
                                    input type="hidden" name="placement" value=(p.key);
                                    input type="hidden" name="rule" value=(i);
                                    input type="hidden" name="enabled" value=(!r.enabled);
                                    button type="submit" { @if r.enabled { "Turn off" } @else { "Turn on" } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The catalog as stored: workspaces, apps, placements with their rules, flows and versions.
pub(super) fn catalog(session: &Session, data: &CatalogData) -> Markup {
    let editor = session.role.allows(Role::Editor);
    let body = html! {
        p.meta {
            "Revision " (data.revision) ". "
            @if editor { "Each change below shows its dry run and asks why before it is applied; files go through " code { "flowgate import" } "." }
            @else { "Editors change it here; files go through " code { "flowgate import" } "." }
        }
        @for w in &data.workspaces {
            section.workspace {
                h2 { "Workspace " (w.name) } p.meta { code { (w.id) } }
                @for app in &w.apps {
                    @let flow_name = |id: Option<flowgate_domain::ids::FlowId>| -> String {
                        match id {
                            None => "no flow".to_owned(),
                            Some(id) => app.flows.iter().find(|f| f.id == id)
                                .map_or_else(|| format!("flow {id}"), |f| format!("flow “{}”", f.name)),
                        }
                    };
                    section.app {
                        h3 { "App " (app.name) } p.meta { code { (app.id) } }
                        h4 { "Placements" }
                        ul.placements { @for p in &app.placements { (catalog_placement(app.id, p, &flow_name, editor)) } }
                        h4 { "Flows" }
                        div.table {
                            table {
                                thead { tr { th scope="col" { "Flow" } th scope="col" { "Id" } th scope="col" { "Versions" } th scope="col" { "Published" } } }
                                tbody {
                                    @for f in &app.flows {
                                        tr {
                                            th scope="row" { (f.name) }
                                            td { code { (f.id) } }
                                            td { @for (i, v) in f.versions.iter().enumerate() { @if i > 0 { ", " } (v.version) } }
                                            td {
                                                @match f.published_version { Some(v) => { "version " (v) } None => { "none" } }
                                                @if editor {
                                                    @for v in f.versions.iter().filter(|v| Some(v.version) != f.published_version) {
                                                        form.inline.publish method="get" action="/console/changes/new" {
                                                            input type="hidden" name="kind" value="publish";
                                                            input type="hidden" name="flow" value=(f.id);
                                                            input type="hidden" name="version" value=(v.version);
                                                            button type="submit" { "Publish version " (v.version) }
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout(Some(session), "Catalog", "/console/catalog", body)
}

/// What the explain form was given.
#[derive(Clone, Debug)]
pub(super) struct ExplainInput {
    pub app: String,
    pub placement: String,
    pub body: String,
}

impl Default for ExplainInput {
    fn default() -> Self {
        Self {
            app: String::new(),
            placement: String::new(),
            body: "{\"user_id\": \"user-1\", \"session_id\": \"session-1\", \"device_platform\": \"ios\", \"attributes\": {\"country\": \"US\"}}".to_owned(),
        }
    }
}

/// A reason in words.
fn reason_text(reason: Reason) -> &'static str {
    match reason {
        Reason::Rule => "a rule whose audience matched chose a flow",
        Reason::Experiment => "an experiment assigned the user a variant with a flow",
        Reason::Holdout => "an experiment assigned the user a holdout variant: no flow",
        Reason::Default => "no rule decided; the placement's default flow is served",
        Reason::NoRuleMatched => "no rule decided and the placement has no default flow: no flow",
        Reason::UnknownPlacement => "the app has no placement with this key: no flow",
        Reason::FlowUnpublished => "the deciding flow has no published version: no flow",
        other => other.as_str(),
    }
}

/// One step of the trace.
fn step(s: &Step, flow_name: &dyn Fn(flowgate_domain::ids::FlowId) -> String) -> Markup {
    match s {
        Step::Default { default } => html! {
            li.step { "Default: " @match default {
                Some(f) => { (flow_name(f.flow_id)) @if f.flow_version_id.is_none() { " (no published version)" } }
                None => { "none" }
            } }
        },
        Step::Rule(r) => html! {
            li.step.decided[r.decided] {
                "Rule " (r.rule) ": audience "
                @if r.audience.matched { strong { "matched" } } @else { strong { "did not match" } }
                @if let Some(m) = &r.audience.mismatch {
                    " at clause " (m.index) " " code.json { (m.clause) } ", which saw " code.json { (serde_json::Value::Object(m.seen.clone())) }
                    @if m.aborted { " (evaluation stopped where GrowthBook's JavaScript throws)" }
                }
                @if let Some(f) = &r.flow {
                    " → " (flow_name(f.flow_id)) @if f.flow_version_id.is_none() { " (no published version)" }
                }
                @if let Some(e) = &r.experiment {
                    div.experiment {
                        "Experiment " (e.name) " (" (e.status.as_str()) "), seed " code { (e.seed) }
                        ", coverage " (percent(e.coverage))
                        @if let Some(n) = &e.namespace {
                            ", namespace " code { (n.id) } " [" (n.start) ", " (n.end) "): hash " (number(n.hash, 4))
                            @if n.inside { " inside" } @else { " outside" }
                        }
                        @if let Some(h) = e.hash { ", user hash " strong { (number(h, 4)) } }
                        @if !e.ranges.is_empty() {
                            ul {
                                @for range in &e.ranges {
                                    li { (range.variant_name) ": [" (number(range.start, 4)) ", " (number(range.end, 4)) ")" }
                                }
                            }
                        }
                        @if let Some(sticky) = &e.sticky {
                            p { "Sticky (bucket version " (sticky.bucket_version) ", minimum " (sticky.min_bucket_version) "): "
                                (serde_json::to_value(sticky.assignment).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()) }
                        }
                        @if let Some(v) = &e.variant {
                            p { "Assigned " strong { (v.name) } ": " @match &v.flow { Some(f) => { (flow_name(f.flow_id)) } None => { "holdout, no flow" } } }
                        }
                        @if let Some(skipped) = e.skipped {
                            p { "Skipped: " (skipped.as_str()) }
                        }
                    }
                }
                @if r.decided { " — " em { "decided" } }
            }
        },
        Step::Off(off) => html! {
            li.step { "Rule " (off.rule) ": off; skipped" }
        },
        // A step this console does not render yet: its JSON, as the admin API gives it.
        other => html! {
            li.step { code.json { (serde_json::to_string(other).unwrap_or_default()) } }
        },
    }
}

/// The explain form, and when run, the outcome: resolve's answer and the trace in words.
pub(super) fn explain(
    session: &Session,
    catalog: &Catalog,
    input: &ExplainInput,
    outcome: Option<&Result<Explained, (StatusCode, String)>>,
) -> Markup {
    let apps: Vec<_> = catalog
        .workspaces()
        .flat_map(|w| {
            w.app_ids()
                .iter()
                .filter_map(|id| catalog.app(*id))
                .map(move |a| (w, a))
        })
        .collect();
    let mut placement_keys: Vec<&str> = apps.iter().flat_map(|(_, a)| a.placement_keys()).collect();
    placement_keys.sort_unstable();
    placement_keys.dedup();
    let app = input
        .app
        .parse::<uuid::Uuid>()
        .ok()
        .and_then(|id| catalog.app(flowgate_domain::ids::AppId::from_uuid(id)));
    let body = html! {
        form #explain method="post" action="/console/explain" {
            (csrf(session))
            label for="app" { "App" }
            select #app name="app" required {
                @for (w, a) in &apps {
                    option value=(a.id()) selected[a.id().to_string() == input.app] { (w.name()) " / " (a.name()) }
                }
            }
            label for="placement" { "Placement key" }
            input #placement name="placement" value=(input.placement) required list="placement-keys";
            datalist #placement-keys {
                @for key in &placement_keys { option value=(key) {} }
            }
            label for="body" { "Resolve request body (JSON)" }
            textarea #body name="body" rows="6" required { (input.body) }
            button type="submit" { "Explain" }
        }
        @match outcome {
            None => {}
            Some(Err((status, message))) => {
                p.error role="alert" { "Refused (" (status.as_u16()) "): " (message) }
            }
            Some(Ok(explained)) => {
                @let flow_name = |id: flowgate_domain::ids::FlowId| -> String {
                    app.and_then(|a| a.flow(id)).map_or_else(|| format!("flow {id}"), |f| format!("flow “{}”", f.name()))
                };
                section #explain-result {
                    h2 { "Outcome" }
                    p { "Reason: " strong #reason { (explained.reason().as_str()) } ": " (reason_text(explained.reason())) "." }
                    h2 { "Trace" }
                    ol.trace { @for s in explained.trace() { (step(s, &flow_name)) } }
                    h2 { "What resolve answers" }
                    pre #result { (pretty(explained.result())) }
                }
            }
        }
    };
    layout(Some(session), "Explain", "/console/explain", body)
}

/// JSON bytes, indented (as they are when they do not parse).
fn pretty(bytes: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| String::from_utf8_lossy(bytes).into_owned())
}

/// The change preview: the upload form, and the D19 dry run of the file uploaded.
pub(super) fn preview(
    session: &Session,
    outcome: Option<(&String, &Result<Preview, PreviewError>)>,
) -> Markup {
    let body = html! {
        p { "Upload a catalog file (JSON or YAML, as " code { "flowgate import" } " reads) to see what importing it would change and how many users each experiment would move. Nothing is written." }
        form #preview method="post" action="/console/preview" enctype="multipart/form-data" {
            (csrf(session))
            label for="file" { "Catalog file" }
            input #file type="file" name="file" accept=".json,.yaml,.yml,application/json" required;
            button type="submit" { "Preview" }
        }
        @if let Some((name, outcome)) = outcome {
            section #preview-result {
                h2 { "Preview of " (name) }
                @match outcome {
                    Err(PreviewError::Invalid(problems)) => {
                        p.error role="alert" { "The file is refused; nothing would be written:" }
                        ul.problems { @for p in problems { li { (p) } } }
                    }
                    Err(PreviewError::Store(e)) => {
                        p.error role="alert" { "The stored catalog could not be read: " (e) }
                    }
                    Ok(preview) => { (preview_report(preview)) }
                }
            }
        }
    };
    layout(Some(session), "Change preview", "/console/preview", body)
}

fn preview_report(preview: &Preview) -> Markup {
    let s = &preview.summary;
    html! {
        p.meta {
            "The store is at revision " (preview.revision) ". The file holds " (s.workspaces) " workspace(s), "
            (s.apps) " app(s), " (s.flows) " flow(s), " (s.versions) " version(s), " (s.placements)
            " placement(s), " (s.keys) " key(s)."
        }
        @if !preview.changed {
            p.ok role="status" #no-change { "No change: the store already holds everything in this file." }
        }
        @for w in &preview.warnings { p.warning role="status" { strong { "Warning: " } (w) } }
        (diff_tables(&preview.diff))
    }
}

/// What a diff changes (D19): experiments whose users move, entity changes, rule lists.
pub(super) fn diff_tables(diff: &flowgate_domain::catalog::CatalogDiff) -> Markup {
    let status =
        |s: Option<flowgate_domain::catalog::ExperimentStatus>| s.map_or("absent", |s| s.as_str());
    html! {
        @if !diff.experiments.is_empty() {
            h3 { "Experiments whose users move" }
            p.hint { "Shares of the users who reach the experiment's rule." }
            div.table {
                table #moved {
                    thead { tr {
                        th scope="col" { "Experiment" } th scope="col" { "Placement" } th scope="col" { "Status" }
                        th.num scope="col" { "Change variant" } th.num scope="col" { "Enter" }
                        th.num scope="col" { "Leave" } th.num scope="col" { "Keep variant" }
                        th.num scope="col" { "Outside" } th scope="col" { "Variants" }
                    } }
                    tbody {
                        @for e in &diff.experiments {
                            tr data-experiment=(e.id) {
                                th scope="row" { (e.name) }
                                td { code { (e.placement_key) } }
                                td { (status(e.status_before)) " → " (status(e.status_after)) }
                                td.num.moved-share { (percent(e.change_variant)) }
                                td.num { (percent(e.enter)) }
                                td.num { (percent(e.leave)) }
                                td.num { (percent(e.keep_variant)) }
                                td.num { (percent(e.outside)) }
                                td {
                                    @for (i, v) in e.variants.iter().enumerate() {
                                        @if i > 0 { "; " }
                                        (v.name) " " (percent(v.before)) " → " (percent(v.after))
                                    }
                                    @if e.rule_changed { br; "its rule's audience or position changes too" }
                                    @if let Some(sticky) = &e.sticky { br; "sticky: " (sticky.note) }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !diff.entities.is_empty() {
            h3 { "Changes" }
            div.table {
                table #changes {
                    thead { tr { th scope="col" { "Change" } th scope="col" { "Entity" } th scope="col" { "Name" } th scope="col" { "Id" } th scope="col" { "Detail" } } }
                    tbody {
                        @for c in &diff.entities {
                            tr {
                                td { (serde_json::to_value(c.change).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()) }
                                td { (c.entity) } th scope="row" { (c.name) } td { code { (c.id) } } td { (c.detail) }
                            }
                        }
                    }
                }
            }
        }
        @if !diff.placements.is_empty() {
            h3 { "Rule lists" }
            ul.rule-lists {
                @for p in &diff.placements {
                    li {
                        code { (p.key) } " (app " code { (p.app_id) } "): " (p.rules_before) " → " (p.rules_after) " rule(s)"
                        @for r in &p.rules { "; rule " (r.rule) ": " (r.change.join(", ")) }
                        @if p.default_changed { "; default flow changed" }
                    }
                }
            }
        }
    }
}

/// The applied imports, newest first.
pub(super) fn history(session: &Session, entries: &[ImportRecord]) -> Markup {
    let body = html! {
        @if entries.is_empty() {
            p { "No catalog import is recorded." }
        } @else {
            div.table {
                table #history {
                    thead { tr {
                        th.num scope="col" { "Revision" } th scope="col" { "Imported at" } th scope="col" { "File" }
                        th scope="col" { "SHA-256" } th scope="col" { "What it held" }
                    } }
                    tbody {
                        @for e in entries {
                            @let s = &e.summary;
                            tr {
                                td.num { (e.revision) }
                                td { (when(e.imported_at)) }
                                td { (e.file) }
                                td { code title=(e.sha256) { (e.sha256.get(..12).unwrap_or(&e.sha256)) } }
                                td { (s.workspaces) " workspace(s), " (s.apps) " app(s), " (s.flows) " flow(s), " (s.versions) " version(s), " (s.placements) " placement(s), " (s.keys) " key(s)" }
                            }
                        }
                    }
                }
            }
        }
    };
    layout(Some(session), "Import history", "/console/history", body)
}

/// A workspace's keys and the form to create one.
pub(super) fn keys(
    session: &Session,
    catalog: &Catalog,
    workspace: Option<WorkspaceId>,
    records: &[KeyRecord],
) -> Markup {
    let workspaces: Vec<_> = catalog.workspaces().collect();
    let body = html! {
        form.inline method="get" action="/console/keys" {
            label for="show-workspace" { "Workspace" }
            select #show-workspace name="workspace" {
                @for w in &workspaces { option value=(w.id()) selected[Some(w.id()) == workspace] { (w.name()) } }
            }
            button type="submit" { "Show" }
        }
        @if records.is_empty() {
            p { "This workspace has no key." }
        } @else {
            div.table {
                table #keys {
                    thead { tr {
                        th scope="col" { "Name" } th scope="col" { "Key" } th scope="col" { "Type" } th scope="col" { "Environment" }
                        th scope="col" { "Created" } th scope="col" { "Status" } th scope="col" { span.visually-hidden { "Action" } }
                    } }
                    tbody {
                        @for r in records {
                            tr data-key=(r.id) {
                                th scope="row" { (r.name) }
                                td { code { (r.display_prefix) "…" } }
                                td { (r.key_type.as_str()) }
                                td { (r.environment.as_str()) }
                                td { (when(r.created_at)) }
                                td.key-status { @match r.revoked_at { Some(at) => { "revoked " (when(at)) } None => { "active" } } }
                                td {
                                    @if r.revoked_at.is_none() {
                                        a.revoke href={ "/console/keys/" (r.id) "/revoke?workspace=" (r.workspace_id) } { "Revoke…" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Create a key" }
        form #create-key method="post" action="/console/keys" {
            (csrf(session))
            label for="workspace" { "Workspace" }
            select #workspace name="workspace" required {
                @for w in &workspaces { option value=(w.id()) selected[Some(w.id()) == workspace] { (w.name()) } }
            }
            label for="environment" { "Environment" }
            select #environment name="environment" {
                option value="live" { "live (production)" }
                option value="test" { "test (staging, development)" }
            }
            label for="type" { "Type" }
            select #type name="type" {
                option value="sdk" { "sdk (publishable, in apps)" }
                option value="webhook" { "webhook (store notifications: RevenueCat)" }
                option value="secret" { "secret (server side)" }
            }
            label for="name" { "Name" }
            input #name name="name" maxlength="200" placeholder="iOS app 2.3";
            button type="submit" { "Create key" }
        }
    };
    layout(Some(session), "SDK keys", "/console/keys", body)
}

/// A key just created: shown this once.
pub(super) fn key_created(session: &Session, created: &CreatedKey) -> Markup {
    let r = &created.record;
    let body = html! {
        p.warning role="status" { strong { "Copy the key now: " } "it is shown this once and never again (only its digest is stored)." }
        p { code #new-key { (created.key.expose()) } }
        p { (r.name) " · " (r.key_type.as_str()) " · " (r.environment.as_str()) " · id " code { (r.id) } }
        p { a href={ "/console/keys?workspace=" (r.workspace_id) } { "Back to the keys" } }
    };
    layout(Some(session), "Key created", "/console/keys", body)
}

/// The confirmation before revoking a key.
pub(super) fn revoke_confirm(session: &Session, r: &KeyRecord) -> Markup {
    let body = html! {
        @if let Some(at) = r.revoked_at {
            p { "This key was revoked at " (when(at)) "." }
        } @else {
            p {
                @if r.key_type == KeyType::Webhook { "Store notifications that carry key " } @else { "Apps that send key " }
                code { (r.display_prefix) "…" } " (" (r.name) ", " (r.key_type.as_str()) ", " (r.environment.as_str()) ") will be refused (401) once the catalog refreshes. This cannot be undone."
            }
            form #revoke-key method="post" action={ "/console/keys/" (r.id) "/revoke?workspace=" (r.workspace_id) } {
                (csrf(session))
                button.danger type="submit" { "Revoke the key" }
                " " a href={ "/console/keys?workspace=" (r.workspace_id) } { "Cancel" }
            }
        }
    };
    layout(Some(session), "Revoke a key", "/console/keys", body)
}
