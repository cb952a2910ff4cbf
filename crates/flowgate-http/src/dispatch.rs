//! The public API as one service: the path is matched by hand ([`Endpoint::parse`]), the
//! handler is called directly, and what every response needs (request id, `/v1` headers,
//! compression, metrics, the log line) is done inline, in this order:
//!
//! 1. request id (D11), kept in the request's extensions for problem bodies;
//! 2. on `/v1`, a CORS preflight is answered at once (D11);
//! 3. the endpoint: 404 `not_found` for an unknown path, 405 `method_not_allowed` with `Allow`
//!    for a known one called with another method, else its handler (the D9 checks run there);
//! 4. on `/v1`, `RateLimit-*` (D10) and CORS headers (D11);
//! 5. compression in the negotiated coding (D11, `response::compression`);
//! 6. `X-Request-Id`, one metrics observation and one log line.
//!
//! One hand-matched service rather than actix's scope, resources and middleware services:
//! those cost about a quarter of the server's CPU per single resolve.

use std::rc::Rc;
use std::time::Instant;

use actix_web::body::BoxBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::header::ContentEncoding;
use actix_web::http::{ConnectionType, Method};
use actix_web::{Error, HttpRequest, HttpResponse};

use crate::connections::Connection;
use crate::handlers::{self, legacy};
use crate::middleware::{self, request_id_of};
use crate::problem::ApiError;
use crate::response::compression;
use crate::router::Endpoint;
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
    let coding = compression::negotiate(&req);
    let connection = req.conn_data::<Connection>();
    let mut res = match preflight {
        _ if connection.is_some_and(|c| c.closing.get()) => {
            // D25: a request pipelined behind a response that closed the connection.
            drop(payload);
            ApiError::after_close().to_response(&request_id_of(&req))
        }
        Some(res) => compression::encode(coding, res.into(), &worker.shared.compressed_flows),
        None => {
            let mut res = handle(endpoint, &req, payload, &worker, coding).await;
            if endpoint.is_v1() {
                middleware::v1_headers(&req, &mut res);
            }
            res
        }
    };
    if let Some(connection) = connection {
        if req.head().connection_type() == ConnectionType::Close
            || res.head().connection_type() == ConnectionType::Close
        {
            connection.closing.set(true);
        }
    }
    middleware::finish(
        Some(middleware::Recording {
            latency: &worker.latencies,
            metrics: &worker.shared.metrics,
        }),
        &req,
        &mut res,
        &id,
        endpoint.pattern(),
        endpoint.app(),
        start,
    );
    Ok(ServiceResponse::new(req, res))
}

/// The endpoint's answer, encoded for `coding`.
async fn handle(
    endpoint: Endpoint<'_>,
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
    coding: ContentEncoding,
) -> HttpResponse {
    let flows = &worker.shared.compressed_flows;
    let Some(method) = endpoint.method() else {
        return handlers::no_route(req);
    };
    if req.method() != method {
        let allow = if method == Method::GET { "GET" } else { "POST" };
        return handlers::method_not_allowed(req, allow);
    }
    let reply = match endpoint {
        Endpoint::Resolve { app, placement } => {
            handlers::resolve::resolve(req, payload, worker, app, placement).await
        }
        // The other endpoints' futures are boxed: the single resolve's is all that every
        // request's allocation is sized for (this future is boxed by actix per request, and
        // past 1,032 bytes the allocator takes its slow path).
        Endpoint::ResolveBatch { app } => {
            Box::pin(handlers::resolve::resolve_batch(
                req, payload, worker, coding, app,
            ))
            .await
        }
        Endpoint::Events { app } => {
            Box::pin(handlers::events::events(req, payload, worker, app)).await
        }
        Endpoint::StoreApple { app } => {
            Box::pin(handlers::store::apple(req, payload, worker, app)).await
        }
        Endpoint::StoreRevenueCat { app } => {
            Box::pin(handlers::store::revenuecat(req, payload, worker, app)).await
        }
        Endpoint::OfrepFlag { .. }
        | Endpoint::OfrepBulk { .. }
        | Endpoint::OfrepConfiguration { .. } => {
            Box::pin(handlers::ofrep::serve(endpoint, req, payload, worker)).await
        }
        Endpoint::LegacyResolve { placement } => {
            let (reply, successor) =
                Box::pin(handlers::legacy::resolve(req, payload, worker, placement)).await;
            let res = compression::encode(coding, reply, flows);
            return legacy::deprecated(res, &successor);
        }
        Endpoint::LegacyEvents => {
            let reply = Box::pin(handlers::legacy::events(req, payload, worker)).await;
            let res = compression::encode(coding, reply, flows);
            return legacy::deprecated(res, legacy::EVENTS_SUCCESSOR);
        }
        Endpoint::OpenApi => crate::openapi::serve().await.into(),
        Endpoint::UnknownV1 | Endpoint::Unknown => handlers::no_route(req).into(),
    };
    compression::encode(coding, reply, flows)
}

#[cfg(test)]
mod tests {
    /// The size of the future an `async fn` of two arguments returns.
    fn future_size<A, B, F>(_: fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// actix boxes every request's future; glibc serves blocks of up to 1,032 bytes from its
    /// per-thread cache and larger ones from its slow path (about 700 instructions more per
    /// request). A handler whose future grows `serve`'s past that is boxed in `handle`.
    #[test]
    fn the_request_future_fits_the_allocators_fast_path() {
        let size = future_size(super::serve);
        assert!(size <= 1032, "serve's future is {size} bytes");
    }
}
