#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod admin;
mod body;
pub mod client_ip;
pub mod config;
mod guard;
pub mod metrics;
mod middleware;
pub mod openapi;
pub mod problem;
pub mod ratelimit;
mod render;
pub mod request_id;
mod routes;
mod state;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::{from_fn, Compress};

use crate::middleware::Route;
use actix_web::{web, App};

pub use admin::{admin_app, AdminSource, AdminState, Check, Readiness, ReadinessReport};
pub use config::{HttpConfig, RateLimitConfig};
pub use metrics::HttpMetrics;
pub use state::{ApiState, CatalogHandle};

/// The public API application: every `/v1` route, `/openapi.json`, problem+json for unknown
/// routes and wrong methods, response compression, request ids, logging and metrics.
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
    let metrics = web::Data::new(state.metrics.clone());
    App::new()
        .app_data(state)
        .app_data(metrics)
        .service(
            web::scope("/v1")
                .wrap(from_fn(middleware::v1_headers))
                .service(
                    web::resource("/apps/{appId}/placements/resolve-batch")
                        .app_data(Route("/v1/apps/{appId}/placements/resolve-batch"))
                        .route(web::post().to(routes::resolve_batch))
                        .default_service(web::to(routes::post_only)),
                )
                .service(
                    web::resource("/apps/{appId}/placements/{placementId}/resolve")
                        .app_data(Route("/v1/apps/{appId}/placements/{placementId}/resolve"))
                        .route(web::post().to(routes::resolve))
                        .default_service(web::to(routes::post_only)),
                )
                .service(
                    web::resource("/apps/{appId}/events")
                        .app_data(Route("/v1/apps/{appId}/events"))
                        .route(web::post().to(routes::events))
                        .default_service(web::to(routes::post_only)),
                )
                .service(
                    web::resource("/placements/{placementId}/resolve")
                        .app_data(Route("/v1/placements/{placementId}/resolve"))
                        .route(web::post().to(routes::legacy_resolve))
                        .default_service(web::to(routes::post_only)),
                )
                .service(
                    web::resource("/events")
                        .app_data(Route("/v1/events"))
                        .route(web::post().to(routes::legacy_events))
                        .default_service(web::to(routes::post_only)),
                )
                .default_service(web::to(routes::not_found)),
        )
        .service(
            web::resource("/openapi.json")
                .app_data(Route("/openapi.json"))
                .route(web::get().to(openapi::serve)),
        )
        .default_service(web::to(routes::not_found))
        .wrap(Compress::default())
        .wrap(from_fn(middleware::observe))
}
