//! The public API as one service: the path is matched by hand ([`Endpoint::parse`]), the
//! handler is called directly, and what every response needs (request id, `/v1` headers,
//! compression, metrics, the log line) is done inline, in this order:
//!
//! 1. request id (D11), kept in the request's extensions for problem bodies;
//! 2. on `/v1`, a CORS preflight is answered at once (D11);
//! 3. the endpoint: 404 `not_found` for an unknown path, 405 `method_not_allowed` with `Allow`
//!    for a known one called with another method, else its handler (the D9 checks run there);
//! 4. on `/v1`, `RateLimit-*` (D10) and CORS headers (D11);
//! 5. compression in the negotiated coding (D11, `middleware::response_coding`);
//! 6. `X-Request-Id`, one metrics observation and one log line.
//!
//! This replaced actix's scope, resources and three middleware services, which cost about a
//! quarter of the server's CPU per single resolve (docs/benchmarks.md, 2026-11-21 night).

use std::rc::Rc;
use std::time::Instant;

use actix_web::body::BoxBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::header::ContentEncoding;
use actix_web::http::Method;
use actix_web::{Error, HttpRequest, HttpResponse};

use crate::middleware;
use crate::router::Endpoint;
use crate::routes;
use crate::worker::{Worker, SWEEP_INTERVAL};

/// Answers one API request.
pub(crate) async fn serve(
    worker: Rc<Worker>,
    req: ServiceRequest,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let start = Instant::now();
    worker.start_sweeper(SWEEP_INTERVAL);
    let (req, payload) = req.into_parts();
    let id = middleware::begin(&req);
    let endpoint = Endpoint::parse(req.match_info().as_str());
    let preflight = if endpoint.is_v1() {
        middleware::preflight(&req)
    } else {
        None
    };
    // Negotiated once: resolve handlers write their body for it (gzip splicing).
    let coding = middleware::response_coding(&req);
    let res = match preflight {
        Some(res) => res,
        None => {
            let mut res = handle(endpoint, &req, payload, &worker, coding).await;
            if endpoint.is_v1() {
                middleware::v1_headers(&req, &mut res);
            }
            res
        }
    };
    let mut res = middleware::compress(coding, res);
    middleware::finish(
        Some(&worker.latencies),
        &req,
        &mut res,
        &id,
        endpoint.pattern(),
        endpoint.app(),
        start,
    );
    Ok(ServiceResponse::new(req, res))
}

async fn handle(
    endpoint: Endpoint<'_>,
    req: &HttpRequest,
    payload: Payload,
    state: &Worker,
    coding: ContentEncoding,
) -> HttpResponse {
    let Some(method) = endpoint.method() else {
        return routes::no_route(req);
    };
    if req.method() != method {
        let allow = if method == Method::GET { "GET" } else { "POST" };
        return routes::method_not_allowed(req, allow);
    }
    match endpoint {
        Endpoint::Resolve { app, placement } => {
            routes::resolve(req, payload, state, coding, app, placement).await
        }
        Endpoint::ResolveBatch { app } => {
            routes::resolve_batch(req, payload, state, coding, app).await
        }
        Endpoint::Events { app } => routes::events(req, payload, state, app).await,
        Endpoint::LegacyResolve { placement } => {
            routes::legacy_resolve(req, payload, state, coding, placement).await
        }
        Endpoint::LegacyEvents => routes::legacy_events(req, payload, state).await,
        Endpoint::OpenApi => crate::openapi::serve().await,
        Endpoint::UnknownV1 | Endpoint::Unknown => routes::no_route(req),
    }
}
