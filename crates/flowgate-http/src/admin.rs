//! The admin listener (D11), on its own port: `/healthz` (the process answers), `/readyz`
//! (can this replica serve?) and `/metrics` (Prometheus text format).
//!
//! Readiness has three states. `ready`: catalog loaded, store and sink healthy. `degraded`
//! (still 200): a catalog is loaded but the store is failing; resolve keeps serving the last
//! snapshot and events are buffered (D12), so taking every replica out of the load balancer
//! during a database outage would turn a partial outage into a total one. `not_ready` (503):
//! no catalog has been loaded yet, so nothing can be served.

use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, App, HttpRequest, HttpResponse};
use prometheus_client::registry::Registry;
use serde::Serialize;

use crate::middleware::request_id_of;
use crate::problem::PROBLEM_JSON;

/// One readiness check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Whether it passes.
    pub ok: bool,
    /// A short explanation (no secrets).
    pub detail: String,
}

/// What `/readyz` reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReadinessReport {
    /// A catalog snapshot is loaded (required to serve).
    pub catalog: Check,
    /// The store answered recently.
    pub store: Check,
    /// The analytics sink is writing.
    pub sink: Check,
}

/// The readiness state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Everything healthy.
    Ready,
    /// Serving from the last snapshot while the store or sink fails.
    Degraded,
    /// Cannot serve yet.
    NotReady,
}

impl ReadinessReport {
    /// The overall state.
    pub fn state(&self) -> Readiness {
        if !self.catalog.ok {
            Readiness::NotReady
        } else if self.store.ok && self.sink.ok {
            Readiness::Ready
        } else {
            Readiness::Degraded
        }
    }
}

/// Supplies readiness and extra metrics text; implemented by the binary, which knows the store,
/// the refresher and the sink.
pub trait AdminSource: Send + Sync {
    /// The current readiness.
    fn readiness(&self) -> ReadinessReport;
    /// Appends metrics in Prometheus text format that are not in the registry (for example
    /// gauges read from the sink's statistics at scrape time). The default appends nothing.
    fn extra_metrics(&self, _out: &mut String) {}
}

/// State of the admin listener.
#[derive(Clone)]
pub struct AdminState {
    registry: Arc<Registry>,
    source: Arc<dyn AdminSource>,
}

impl AdminState {
    /// Serves `registry` and `source`.
    pub fn new(registry: Arc<Registry>, source: Arc<dyn AdminSource>) -> Self {
        Self { registry, source }
    }
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
            let body = serde_json::json!({
                "type": "https://flowgate.dev/problems/not_ready",
                "title": "Not ready",
                "status": 503,
                "detail": "no catalog snapshot is loaded yet",
                "code": "not_ready",
                "request_id": request_id_of(&req),
                "checks": report,
            });
            HttpResponse::build(StatusCode::SERVICE_UNAVAILABLE)
                .insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)))
                .body(body.to_string())
        }
    }
}

async fn metrics(state: web::Data<AdminState>) -> HttpResponse {
    let mut out = String::with_capacity(16 * 1024);
    if prometheus_client::encoding::text::encode_registry(&mut out, &state.registry).is_err() {
        return HttpResponse::InternalServerError().finish();
    }
    state.source.extra_metrics(&mut out);
    out.push_str("# EOF\n");
    HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ))
        .body(out)
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
    App::new()
        .app_data(web::Data::new(state))
        .service(labelled("/healthz").route(web::get().to(healthz)))
        .service(labelled("/readyz").route(web::get().to(readyz)))
        .service(labelled("/metrics").route(web::get().to(metrics)))
        .default_service(web::to(crate::routes::not_found))
        .wrap(actix_web::middleware::from_fn(crate::middleware::observe))
}
