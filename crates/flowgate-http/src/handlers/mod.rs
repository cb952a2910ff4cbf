//! The `/v1` handlers, one module per resource. Each one runs the D9 checks in order
//! (`guard`), then reads and validates its body, and answers either its result or a problem
//! (the only error path, so every error carries the request id). How the answer is encoded is
//! `response::compression`'s decision.

use actix_web::{HttpRequest, HttpResponse};

use crate::middleware::request_id_of;
use crate::problem::ApiError;
use crate::response::Reply;

pub(crate) mod events;
pub(crate) mod identity;
pub(crate) mod legacy;
pub(crate) mod ofrep;
pub(crate) mod resolve;
pub(crate) mod store;

type Result<T, E = ApiError> = std::result::Result<T, E>;

/// The handler's reply, or its error as a problem response.
fn or_problem(req: &HttpRequest, result: Result<Reply>) -> Reply {
    result.unwrap_or_else(|e| e.to_response(&request_id_of(req)).into())
}

/// Unknown route: 404 `not_found`.
pub fn no_route(req: &HttpRequest) -> HttpResponse {
    ApiError::not_found().to_response(&request_id_of(req))
}

/// Unknown route (as an actix handler, for the admin listener): 404 `not_found`.
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    no_route(&req)
}

/// Known route, wrong method: 405 `method_not_allowed` with `Allow: <allow>`.
pub fn method_not_allowed(req: &HttpRequest, allow: &'static str) -> HttpResponse {
    ApiError::method_not_allowed(allow).to_response(&request_id_of(req))
}
