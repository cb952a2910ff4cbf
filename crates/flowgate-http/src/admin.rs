//! The admin listener (D11), on its own port: `/healthz` (the process answers), `/readyz`
//! (can this replica serve?) and `/metrics` (Prometheus text format); with `admin.token`, the
//! admin API: explain (D18), experiment results (D22), the audit log and rollouts, a reviewed
//! change's rejection (D35), and the operator console (D24, [`crate::console`]).
//!
//! Readiness has three states, from named checks that the process supplies
//! ([`ReadinessReport`]): `ready` when every check passes; `not_ready` (503) when a required
//! check fails (`serve`: no catalog loaded yet, so nothing can be served; `ingest`: no
//! connection to the event bus); `degraded` (still 200) when only others fail. `serve` with a
//! loaded catalog and a failing store is degraded, not unready: resolve keeps serving the last
//! snapshot (D12), so taking every replica out of the load balancer during a database outage
//! would turn a partial outage into a total one.

use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, App, HttpRequest, HttpResponse};
use prometheus_client::registry::Registry;
use serde::Serialize;

use crate::access::same_secret;
pub use crate::access::{ExplainAccess, ResultsAccess};
use crate::middleware::request_id_of;
use crate::problem::{problem_body, problem_builder, NoExtra};
use crate::results::{experiments_json, report_json};
use flowgate_control::results::{experiment_list, ReportError, ReportParams};
use flowgate_control::review::decide::DecideFailure;

/// One readiness check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Whether it passes.
    pub ok: bool,
    /// A short explanation (no secrets).
    pub detail: String,
}

/// What `/readyz` reports: named checks, each required (failing: not ready) or not (failing:
/// degraded). Serialised as an object of the checks by name, in the order added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadinessReport {
    checks: Vec<(&'static str, Check, bool)>,
}

/// The readiness state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Everything healthy.
    Ready,
    /// Serving, while a check that is not required fails.
    Degraded,
    /// A required check fails.
    NotReady,
}

impl ReadinessReport {
    /// An empty report (ready).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a check without which the process cannot work: failing, it is not ready.
    pub fn required(mut self, name: &'static str, check: Check) -> Self {
        self.checks.push((name, check, true));
        self
    }

    /// Adds a check whose failure degrades the process without stopping it.
    pub fn check(mut self, name: &'static str, check: Check) -> Self {
        self.checks.push((name, check, false));
        self
    }

    /// The check named `name`.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, c, _)| c)
    }

    /// Replaces the check named `name` (keeping whether it is required).
    pub fn set(&mut self, name: &str, check: Check) {
        if let Some(slot) = self.checks.iter_mut().find(|(n, _, _)| *n == name) {
            slot.1 = check;
        }
    }

    /// The overall state.
    pub fn state(&self) -> Readiness {
        if self
            .checks
            .iter()
            .any(|(_, c, required)| *required && !c.ok)
        {
            Readiness::NotReady
        } else if self.checks.iter().all(|(_, c, _)| c.ok) {
            Readiness::Ready
        } else {
            Readiness::Degraded
        }
    }

    /// The details of the failing required checks, for the `not_ready` problem.
    fn unready_detail(&self) -> String {
        self.checks
            .iter()
            .filter(|(_, c, required)| *required && !c.ok)
            .map(|(name, c, _)| format!("{name}: {}", c.detail))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl Serialize for ReadinessReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.checks.len()))?;
        for (name, check, _) in &self.checks {
            map.serialize_entry(name, check)?;
        }
        map.end()
    }
}

/// Supplies readiness; implemented by the binary, which knows the store, the refresher and the
/// sink. Metrics read at scrape time are collectors of the registry.
pub trait AdminSource: Send + Sync {
    /// The current readiness.
    fn readiness(&self) -> ReadinessReport;
}

/// State of the admin listener.
#[derive(Clone)]
pub struct AdminState {
    registry: Arc<Registry>,
    source: Arc<dyn AdminSource>,
    explain: Option<Arc<ExplainAccess>>,
    results: Option<Arc<ResultsAccess>>,
    console: Option<web::Data<crate::console::Console>>,
    /// The audit log (D28), served with the results' token.
    audit: Option<Arc<dyn flowgate_domain::ports::AuditLog>>,
    /// Rollouts (D29), served with the results' token.
    rollouts: Option<Arc<dyn flowgate_domain::ports::RolloutStore>>,
    /// Wrong admin tokens per client address, shared with the console's sign-in.
    guard: Arc<crate::token_guard::TokenGuard>,
}

impl AdminState {
    /// Serves `registry` and `source`.
    pub fn new(registry: Arc<Registry>, source: Arc<dyn AdminSource>) -> Self {
        Self {
            registry,
            source,
            explain: None,
            results: None,
            console: None,
            audit: None,
            rollouts: None,
            guard: Arc::new(crate::token_guard::TokenGuard::new()),
        }
    }

    /// Also serves `GET /admin/v1/audit` (D28) from `audit`, to callers presenting the
    /// results' token (with [`AdminState::with_results`]; without it the route does not exist).
    pub fn with_audit(mut self, audit: Arc<dyn flowgate_domain::ports::AuditLog>) -> Self {
        self.audit = Some(audit);
        self
    }

    /// Also serves `GET /admin/v1/rollouts[/{rolloutId}]` (D29) from `rollouts`, to callers
    /// presenting the results' token (with [`AdminState::with_results`]; without it the routes
    /// do not exist).
    pub fn with_rollouts(
        mut self,
        rollouts: Arc<dyn flowgate_domain::ports::RolloutStore>,
    ) -> Self {
        self.rollouts = Some(rollouts);
        self
    }

    /// Also serves `POST /admin/v1/apps/{appId}/placements/{placementId}/explain` (D18), to
    /// callers presenting `access.token`. Without it the route does not exist (404).
    pub fn with_explain(mut self, access: ExplainAccess) -> Self {
        self.explain = Some(Arc::new(access));
        self
    }

    /// Also serves `GET /admin/v1/experiments` and `GET /admin/v1/experiments/{id}/results`
    /// (D22), to callers presenting `access.token`. Without it the routes do not exist (404).
    pub fn with_results(mut self, access: ResultsAccess) -> Self {
        self.results = Some(Arc::new(access));
        self
    }

    /// Also serves the operator console at `/console/` (D24), signed in with the admin token;
    /// call it after [`AdminState::with_explain`] and [`AdminState::with_results`], whose
    /// access it uses. Without them, or without this call, `/console/` does not exist (404).
    pub fn with_console(mut self, access: crate::console::ConsoleAccess) -> Self {
        if let (Some(explain), Some(results)) = (&self.explain, &self.results) {
            // Built once: every worker's requests share its sessions.
            self.console = Some(web::Data::new(crate::console::Console::new(
                access,
                Arc::clone(explain),
                Arc::clone(results),
                Arc::clone(&self.guard),
            )));
        }
        self
    }
}

/// The 401 of the admin API: no or another token.
fn admin_unauthorized(req: &HttpRequest, detail: &str) -> HttpResponse {
    let mut response = admin_problem(
        req,
        StatusCode::UNAUTHORIZED,
        "admin_unauthorized",
        "Admin token required",
        detail,
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// The 429 of the admin API: too many wrong tokens from the client's address.
fn admin_limited(req: &HttpRequest, retry_after_secs: u32) -> HttpResponse {
    let mut response = admin_problem(
        req,
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        "Rate limited",
        &format!("too many wrong admin tokens from this address; retry in {retry_after_secs} s"),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}

/// `None` when the request presents `token` as its bearer token, else the answer: 401, or 429
/// once its address has sent too many wrong tokens (the right one then waits too). Wrong and
/// missing tokens count per address in the console's sign-in limiter (`token_guard`).
fn refuse_without(
    req: &HttpRequest,
    token: &str,
    guard: &crate::token_guard::TokenGuard,
) -> Option<HttpResponse> {
    let client = crate::token_guard::client_of(req);
    if let Some(wait) = guard.blocked(client) {
        return Some(admin_limited(req, wait));
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::authorization::bearer_token);
    let detail = match presented {
        None => "send Authorization: Bearer <admin.token>",
        Some(given) if !same_secret(given.as_bytes(), token.as_bytes()) => {
            "the bearer token is not the admin token"
        }
        Some(_) => return None,
    };
    let route = req.match_pattern().unwrap_or_default();
    Some(match guard.failed(client, &route) {
        Some(wait) => admin_limited(req, wait),
        None => admin_unauthorized(req, detail),
    })
}

/// A problem+json answer of the admin API.
fn admin_problem(
    req: &HttpRequest,
    status: StatusCode,
    code: &str,
    title: &str,
    detail: &str,
) -> HttpResponse {
    let request_id = request_id_of(req);
    problem_builder(status).body(problem_body(
        status,
        code,
        title,
        detail,
        &request_id,
        NoExtra {},
    ))
}

/// The answer to a results request that failed (D22).
fn report_problem(req: &HttpRequest, error: &ReportError) -> HttpResponse {
    match error {
        ReportError::UnknownExperiment(_) => admin_problem(
            req,
            StatusCode::NOT_FOUND,
            "experiment_not_found",
            "Experiment not found",
            &error.to_string(),
        ),
        ReportError::UnknownApp(_) => admin_problem(
            req,
            StatusCode::NOT_FOUND,
            "app_not_found",
            "App not found",
            &error.to_string(),
        ),
        ReportError::InvalidParam { .. } => admin_problem(
            req,
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "Invalid request",
            &error.to_string(),
        ),
        ReportError::Store(cause) if error.timed_out() => {
            tracing::warn!(request_id = %request_id_of(req), error = %cause, "results read timed out");
            admin_problem(
                req,
                StatusCode::SERVICE_UNAVAILABLE,
                "results_timeout",
                "Results took too long",
                "the results were not read within experiments.query_timeout_ms; ask for a \
                 shorter window (from, to), or raise the limit",
            )
        }
        ReportError::Store(cause) => {
            tracing::error!(request_id = %request_id_of(req), error = %cause, "results read failed");
            admin_problem(
                req,
                StatusCode::SERVICE_UNAVAILABLE,
                "results_unavailable",
                "Results unavailable",
                "the results store could not be read; retry later (the cause is in the log \
                 with this request id)",
            )
        }
    }
}

/// The query parameters of a results request: each of `allowed` (repeated for `metric`), or a
/// 400 naming the first other one.
fn query_params(req: &HttpRequest, allowed: &[&str]) -> Result<Vec<(String, String)>, ReportError> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map_err(|e| ReportError::InvalidParam {
            param: "query",
            message: format!("{:?} is not a query string: {e}", req.query_string()),
        })?
        .into_inner();
    if let Some((name, _)) = pairs.iter().find(|(n, _)| !allowed.contains(&n.as_str())) {
        return Err(ReportError::InvalidParam {
            param: "query",
            message: format!(
                "unknown parameter {name:?}; this route takes {}",
                allowed.join(", ")
            ),
        });
    }
    Ok(pairs)
}

/// The one value of parameter `name`, if given; twice is an error.
fn single<'p>(
    pairs: &'p [(String, String)],
    name: &'static str,
) -> Result<Option<&'p str>, ReportError> {
    let mut values = pairs
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str());
    let first = values.next();
    if values.next().is_some() {
        return Err(ReportError::InvalidParam {
            param: name,
            message: "given more than once".to_owned(),
        });
    }
    Ok(first)
}

fn json_ok(value: &serde_json::Value) -> HttpResponse {
    crate::response::json_response(StatusCode::OK, value.to_string())
}

/// The results routes' access: no route without `admin.token` (D22), 401 without the token.
fn results_access<'a>(
    req: &HttpRequest,
    state: &'a AdminState,
) -> Result<&'a ResultsAccess, Box<HttpResponse>> {
    let Some(access) = state.results.as_deref() else {
        return Err(Box::new(crate::handlers::no_route(req)));
    };
    match refuse_without(req, &access.token, &state.guard) {
        Some(refused) => Err(Box::new(refused)),
        None => Ok(access),
    }
}

/// Most entries `GET /admin/v1/audit` returns at once.
pub const AUDIT_LIMIT: usize = 1000;

/// `GET /admin/v1/audit[?since=&actor=&action=&before=&limit=]` (D28): entries newest first.
async fn list_audit(req: HttpRequest, state: web::Data<AdminState>) -> HttpResponse {
    let Some(audit) = state.audit.as_ref() else {
        return crate::handlers::no_route(&req);
    };
    if let Err(refused) = results_access(&req, &state) {
        return *refused;
    }
    let query = (|| {
        let pairs = query_params(&req, &["since", "actor", "action", "before", "limit"])?;
        let limit = match single(&pairs, "limit")? {
            None => 100,
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=AUDIT_LIMIT).contains(n))
                .ok_or_else(|| ReportError::InvalidParam {
                    param: "limit",
                    message: format!("must be 1 to {AUDIT_LIMIT}, not {text:?}"),
                })?,
        };
        let fields = crate::console::Fields(pairs.clone());
        crate::console::people::audit_query(&fields, limit).map_err(|message| {
            ReportError::InvalidParam {
                param: "query",
                message,
            }
        })
    })();
    let query = match query {
        Ok(query) => query,
        Err(e) => return report_problem(&req, &e),
    };
    match audit.list_audit(&query).await {
        Ok(entries) => {
            let next = (entries.len() == query.limit)
                .then(|| entries.last().map(|e| e.id))
                .flatten();
            json_ok(&serde_json::json!({
                "entries": entries.iter().map(crate::console::people::audit_json).collect::<Vec<_>>(),
                "next_before": next,
            }))
        }
        Err(e) => report_problem(&req, &ReportError::Store(e)),
    }
}

/// `GET /admin/v1/rollouts[?state=]` (D29): every rollout, newest first.
async fn list_rollouts(req: HttpRequest, state: web::Data<AdminState>) -> HttpResponse {
    let Some(rollouts) = state.rollouts.as_ref() else {
        return crate::handlers::no_route(&req);
    };
    if let Err(refused) = results_access(&req, &state) {
        return *refused;
    }
    let wanted = (|| {
        let pairs = query_params(&req, &["state"])?;
        single(&pairs, "state")?
            .map(|text| {
                text.parse::<flowgate_domain::rollouts::RolloutState>()
                    .map_err(|e| ReportError::InvalidParam {
                        param: "state",
                        message: e.to_string(),
                    })
            })
            .transpose()
    })();
    let wanted = match wanted {
        Ok(wanted) => wanted,
        Err(e) => return report_problem(&req, &e),
    };
    match rollouts.list_rollouts(wanted).await {
        Ok(listed) => json_ok(&serde_json::json!({
            "rollouts": listed.iter().map(crate::rollouts::rollout_json).collect::<Vec<_>>(),
        })),
        Err(e) => report_problem(&req, &ReportError::Store(e)),
    }
}

/// `GET /admin/v1/rollouts/{rolloutId}` (D29).
async fn show_rollout(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AdminState>,
) -> HttpResponse {
    let Some(rollouts) = state.rollouts.as_ref() else {
        return crate::handlers::no_route(&req);
    };
    if let Err(refused) = results_access(&req, &state) {
        return *refused;
    }
    let text = path.into_inner();
    let Ok(id) = text.parse::<flowgate_domain::ids::RolloutId>() else {
        let e = ReportError::InvalidParam {
            param: "rolloutId",
            message: format!("{text:?} is not a UUID in its hyphenated form"),
        };
        return report_problem(&req, &e);
    };
    match rollouts.rollout(id).await {
        Ok(Some(r)) => json_ok(&crate::rollouts::rollout_json(&r)),
        Ok(None) => admin_problem(
            &req,
            StatusCode::NOT_FOUND,
            "rollout_not_found",
            "Rollout not found",
            &format!("no rollout {id}"),
        ),
        Err(e) => report_problem(&req, &ReportError::Store(e)),
    }
}

/// `GET /admin/v1/experiments[?app_id=]` (D22).
async fn list_experiments(req: HttpRequest, state: web::Data<AdminState>) -> HttpResponse {
    let access = match results_access(&req, &state) {
        Ok(access) => access,
        Err(refused) => return *refused,
    };
    let catalog = access.catalog.load();
    let started = std::time::Instant::now();
    let listed = async {
        let pairs = query_params(&req, &["app_id"])?;
        let app = single(&pairs, "app_id")?;
        experiment_list(&catalog, access.source.as_ref(), app).await
    }
    .await;
    access.metrics.observe(started.elapsed(), &listed);
    match listed {
        Ok((listed, exposed)) => json_ok(&experiments_json(&listed, &exposed)),
        Err(e) => report_problem(&req, &e),
    }
}

/// `GET /admin/v1/experiments/{id}/results[?from=&to=&metric=...&method=&horizon=]` (D22, D27,
/// D30).
async fn experiment_results(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AdminState>,
) -> HttpResponse {
    let access = match results_access(&req, &state) {
        Ok(access) => access,
        Err(refused) => return *refused,
    };
    let params = (|| {
        let pairs = query_params(&req, &["from", "to", "metric", "method", "horizon"])?;
        let metrics: Vec<&str> = pairs
            .iter()
            .filter(|(n, _)| n == "metric")
            .map(|(_, v)| v.as_str())
            .collect();
        ReportParams::parse(
            single(&pairs, "from")?,
            single(&pairs, "to")?,
            &metrics,
            single(&pairs, "method")?,
        )?
        .with_horizon(single(&pairs, "horizon")?)
    })();
    let report = match params {
        Ok(params) => access.report(&path, &params).await,
        Err(e) => Err(e),
    };
    match report {
        Ok(report) => json_ok(&report_json(&report)),
        Err(e) => report_problem(&req, &e),
    }
}

/// `POST /admin/v1/apps/{appId}/placements/{placementId}/explain` (D18).
async fn explain(
    req: HttpRequest,
    payload: web::Payload,
    path: web::Path<(String, String)>,
    state: web::Data<AdminState>,
) -> HttpResponse {
    let Some(access) = state.explain.as_deref() else {
        return crate::handlers::no_route(&req);
    };
    if let Some(refused) = refuse_without(&req, &access.token, &state.guard) {
        return refused;
    }
    let (app_id, key) = path.into_inner();
    let result = async {
        let body = crate::request_body::read_document(
            &req,
            payload.into_inner(),
            access.body_limit,
            crate::request_body::Encoding::IdentityOnly,
            &access.body_pace,
        )
        .await?;
        let catalog = access.catalog.load_full();
        crate::explain::explain(
            &catalog,
            &app_id,
            &key,
            &body,
            access.default_ttl,
            access.sticky.as_deref(),
        )
        .await
    }
    .await;
    match result {
        Ok(explained) => HttpResponse::Ok()
            .insert_header((
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ))
            .body(explained.to_json()),
        Err(e) => e.to_response(&request_id_of(&req)),
    }
}

/// The body of a rejection.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Rejection {
    /// Why, for the change's author and the audit log.
    comment: String,
}

/// `POST /admin/v1/changes/{changeId}/reject` `{"comment": "why"}` (D35), with the admin
/// token: the pending change `rejected` as `admin-token`, the comment kept as its note and in
/// the audit log; 200 with the change. The control plane's rejection, as the console's and
/// `flowgate changes reject`'s: 404 `change_not_found`, 409 `not_pending`, 400
/// `invalid_comment` or `invalid_body`, 503 when the store fails.
async fn reject_change(
    req: HttpRequest,
    payload: web::Payload,
    path: web::Path<String>,
    state: web::Data<AdminState>,
) -> HttpResponse {
    let Some(console) = state.console.as_ref() else {
        return crate::handlers::no_route(&req);
    };
    if let Err(refused) = results_access(&req, &state) {
        return *refused;
    }
    let text = path.into_inner();
    let Ok(id) = text.parse::<flowgate_domain::ids::ChangeId>() else {
        let e = ReportError::InvalidParam {
            param: "changeId",
            message: format!("{text:?} is not a UUID in its hyphenated form"),
        };
        return report_problem(&req, &e);
    };
    let body = match crate::request_body::read_document(
        &req,
        payload.into_inner(),
        REJECT_BODY_LIMIT,
        crate::request_body::Encoding::IdentityOnly,
        &crate::BodyPace::default(),
    )
    .await
    {
        Ok(body) => body,
        Err(e) => return e.to_response(&request_id_of(&req)),
    };
    let rejection: Rejection = match serde_json::from_slice(&body) {
        Ok(rejection) => rejection,
        Err(e) => {
            return admin_problem(
                &req,
                StatusCode::BAD_REQUEST,
                "invalid_body",
                "Invalid body",
                &format!("the body is {{\"comment\": \"why\"}}: {e}"),
            )
        }
    };
    let actor = flowgate_domain::people::ADMIN_TOKEN_ACTOR;
    match console
        .use_cases()
        .reject_change(id, actor, &rejection.comment)
        .await
    {
        Ok(record) => json_ok(&crate::changes::change_json(&record)),
        Err(failure) => decide_problem(&req, &failure),
    }
}

/// A change not decided, as problem+json.
fn decide_problem(req: &HttpRequest, failure: &DecideFailure) -> HttpResponse {
    let (status, code, title) = match failure {
        DecideFailure::NotFound(_) => (
            StatusCode::NOT_FOUND,
            "change_not_found",
            "Change not found",
        ),
        DecideFailure::NotPending { .. } => {
            (StatusCode::CONFLICT, "not_pending", "Change not pending")
        }
        DecideFailure::OwnChange | DecideFailure::NotAuthor => {
            (StatusCode::FORBIDDEN, failure.code(), "Not allowed")
        }
        DecideFailure::Comment(_) => (
            StatusCode::BAD_REQUEST,
            "invalid_comment",
            "Invalid comment",
        ),
        DecideFailure::Store(e) => return report_problem(req, &ReportError::Store(e.clone())),
    };
    admin_problem(req, status, code, title, &failure.to_string())
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({"status": "ok"}))
}

#[derive(Serialize)]
struct ReadyBody<'a> {
    status: &'static str,
    checks: &'a ReadinessReport,
}

async fn readyz(req: HttpRequest, state: web::Data<AdminState>) -> HttpResponse {
    let report = state.source.readiness();
    match report.state() {
        Readiness::Ready => HttpResponse::Ok().json(ReadyBody {
            status: "ready",
            checks: &report,
        }),
        Readiness::Degraded => HttpResponse::Ok().json(ReadyBody {
            status: "degraded",
            checks: &report,
        }),
        Readiness::NotReady => {
            #[derive(Serialize)]
            struct Checks<'a> {
                checks: &'a ReadinessReport,
            }
            let status = StatusCode::SERVICE_UNAVAILABLE;
            let request_id = request_id_of(&req);
            let detail = report.unready_detail();
            let checks = Checks { checks: &report };
            problem_builder(status).body(problem_body(
                status,
                "not_ready",
                "Not ready",
                &detail,
                &request_id,
                checks,
            ))
        }
    }
}

async fn metrics(state: web::Data<AdminState>) -> HttpResponse {
    let mut out = String::with_capacity(16 * 1024);
    if prometheus_client::encoding::text::encode_registry(&mut out, &state.registry).is_err() {
        return HttpResponse::InternalServerError().finish();
    }
    out.push_str("# EOF\n");
    HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ))
        .body(out)
}

/// The explain route (D18).
const EXPLAIN_PATH: &str = "/admin/v1/apps/{appId}/placements/{placementId}/explain";

/// The results routes (D22).
const EXPERIMENTS_PATH: &str = "/admin/v1/experiments";
const RESULTS_PATH: &str = "/admin/v1/experiments/{experimentId}/results";
/// The audit log's route (D28).
const AUDIT_PATH: &str = "/admin/v1/audit";
/// The rollouts' routes (D29).
const ROLLOUTS_PATH: &str = "/admin/v1/rollouts";
const ROLLOUT_PATH: &str = "/admin/v1/rollouts/{rolloutId}";
const CHANGE_REJECT_PATH: &str = "/admin/v1/changes/{changeId}/reject";
/// The largest body of a rejection: a comment of 2,000 characters of four bytes each, escaped.
const REJECT_BODY_LIMIT: usize = 64 * 1024;

/// A resource answering GET with `handler` and 405 otherwise.
fn get_only<F, Args>(path: &'static str, handler: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    labelled(path)
        .route(web::get().to(handler))
        .default_service(web::to(|req: HttpRequest| async move {
            crate::handlers::method_not_allowed(&req, "GET")
        }))
}

/// A resource that reports its path as its route label (`middleware::Route`).
fn labelled(path: &'static str) -> actix_web::Resource {
    web::resource(path).app_data(crate::middleware::Route(path))
}

/// The admin application.
pub fn admin_app(
    state: AdminState,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let console = state.console.clone();
    App::new()
        .app_data(web::Data::new(state))
        .configure(|cfg| {
            if let Some(console) = console {
                cfg.service(crate::console::scope(console));
            }
        })
        .service(labelled("/healthz").route(web::get().to(healthz)))
        .service(labelled("/readyz").route(web::get().to(readyz)))
        .service(labelled("/metrics").route(web::get().to(metrics)))
        .service(
            labelled(EXPLAIN_PATH)
                .route(web::post().to(explain))
                .default_service(web::to(|req: HttpRequest| async move {
                    crate::handlers::method_not_allowed(&req, "POST")
                })),
        )
        .service(get_only(EXPERIMENTS_PATH, list_experiments))
        .service(get_only(RESULTS_PATH, experiment_results))
        .service(get_only(AUDIT_PATH, list_audit))
        .service(get_only(ROLLOUTS_PATH, list_rollouts))
        .service(get_only(ROLLOUT_PATH, show_rollout))
        .service(
            labelled(CHANGE_REJECT_PATH)
                .route(web::post().to(reject_change))
                .default_service(web::to(|req: HttpRequest| async move {
                    crate::handlers::method_not_allowed(&req, "POST")
                })),
        )
        .default_service(web::to(crate::handlers::not_found))
        .wrap(actix_web::middleware::from_fn(crate::middleware::observe))
}
