#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod access;
pub mod admin;
pub mod apple_demo_signer;
pub mod apple_jws;
#[cfg(any(test, feature = "test-util"))]
pub mod apple_test_chain;
pub mod authorization;
pub mod background;
pub mod changes;
pub mod client_ip;
pub mod config;
pub mod connections;
pub mod console;
mod dispatch;
pub mod explain;
mod guard;
mod handlers;
mod log_sampler;
pub mod metrics;
mod middleware;
pub mod oidc;
pub mod openapi;
pub mod problem;
pub mod ratelimit;
mod request_body;
pub mod request_id;
mod resolve_body;
mod response;
pub mod results;
pub mod rollouts;
pub mod router;
mod state;
pub mod sticky;
mod token_guard;
mod unknown_placements;
mod worker;

use actix_web::body::MessageBody;
use actix_web::dev::{fn_service, ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{web, App};

pub use admin::{
    admin_app, AdminSource, AdminState, Check, ExplainAccess, Readiness, ReadinessReport,
    ResultsAccess,
};
pub use config::{BodyPace, HttpConfig, RateLimitConfig};
pub use connections::ConnectionLimits;
pub use metrics::HttpMetrics;
pub use state::StoreRoutes;
pub use state::{ApiState, CatalogHandle};

/// The public API application: every `/v1` route, `/openapi.json`, problem+json for unknown
/// routes and wrong methods, response compression, request ids, logging and metrics, all in
/// one service that routes by hand (`dispatch::serve`, [`router::Endpoint`]).
pub fn api_app(
    state: web::Data<ApiState>,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    // Built once per worker thread: its requests share this worker's `Rc`, not an `Arc` that
    // every worker's requests write (worker.rs).
    let worker = std::rc::Rc::new(worker::Worker::new(state.clone()));
    App::new()
        .app_data(state)
        .default_service(fn_service(move |req| {
            dispatch::serve(std::rc::Rc::clone(&worker), req)
        }))
}
