//! The checks every `/v1` request passes, in the order D9 fixes: the client's rate limit, the
//! key (401), the key's rate limit (429), then path parameters and the app (400, 404, 403).
//! Bodies come last, in the handlers.

use std::net::IpAddr;
use std::rc::Rc;

use actix_web::http::header;
use actix_web::{HttpMessage, HttpRequest};
use flowgate_domain::catalog::{App, AppAccessError};
use flowgate_domain::ids::{AppId, WorkspaceId};
use flowgate_domain::placement::validate_placement_key;

use crate::client_ip::client_ip;
use crate::problem::ApiError;
use crate::ratelimit::Decision;
use crate::state::ApiState;
use crate::worker::{Worker, WorkerSnapshot};

/// The rate-limit state reported in `RateLimit-*` headers, left in the request's extensions for
/// the middleware that writes them on every response of a limited route (D10).
#[derive(Clone, Copy, Debug)]
pub struct RateLimitInfo(pub Decision);

/// An authenticated caller.
#[derive(Debug)]
pub struct Caller {
    /// The snapshot the whole request uses (one request never sees two catalogs), held
    /// through the worker's own `Rc` (worker.rs).
    pub catalog: Rc<WorkerSnapshot>,
    /// The key's workspace (D1: derived from the key, never sent).
    pub workspace: WorkspaceId,
}

/// Of the client's and the key's limit, the one to report in `RateLimit-*`: the one closest to
/// refusing, which is the one the client should pace itself by.
fn closest_limit(client: Decision, key: Decision) -> Decision {
    if client.remaining <= key.remaining && key.allowed {
        client
    } else {
        key
    }
}

/// Leaves the limit to report in `RateLimit-*` in the request's extensions (once per request:
/// each insert allocates).
fn report_limit(req: &HttpRequest, decision: Decision) {
    req.extensions_mut().insert(RateLimitInfo(decision));
}

/// `X-Forwarded-For`, as a constant: a lookup by `&str` builds (and allocates) the name.
const X_FORWARDED_FOR: header::HeaderName = header::HeaderName::from_static("x-forwarded-for");

/// The client IP used for per-IP limits.
pub fn client_address(req: &HttpRequest, state: &ApiState) -> Option<IpAddr> {
    let forwarded: Vec<&str> = req
        .headers()
        .get_all(X_FORWARDED_FOR)
        .filter_map(|v| v.to_str().ok())
        .collect();
    client_ip(
        req.peer_addr().map(|a| a.ip()),
        &forwarded,
        &state.config.rate_limit.trusted_proxies,
    )
}

/// Per-client limit, key, per-key limit.
pub(crate) fn authenticate(req: &HttpRequest, worker: &Worker) -> Result<Caller, ApiError> {
    // Clients without an address (not seen on TCP listeners) share one bucket.
    let state = &worker.shared;
    let client = state.ip_limiter.check(&client_address(req, state));
    if !client.allowed {
        report_limit(req, client);
        state.metrics.rate_limited("ip");
        return Err(ApiError::rate_limited(client.retry_after_secs));
    }
    let catalog = worker.snapshot();
    let mut presented = req.headers().get_all(header::AUTHORIZATION);
    let token = presented
        .next()
        .and_then(|v| crate::authorization::bearer_token(v.to_str().unwrap_or("")));
    // D25: two keys are not "the first one"; which one a proxy or cache in between would
    // have used is anybody's guess.
    let record = if presented.next().is_some() {
        Err(ApiError::several_authorization_headers())
    } else {
        catalog
            .authenticate(token, state.config.key_environment)
            .map_err(ApiError::unauthorized)
    };
    let record = match record {
        Ok(record) => record,
        Err(e) => {
            report_limit(req, client);
            return Err(e);
        }
    };
    let workspace = record.workspace_id;
    let key = state.key_limiter.check(&record.id);
    report_limit(req, closest_limit(client, key));
    if !key.allowed {
        state.metrics.rate_limited("key");
        return Err(ApiError::rate_limited(key.retry_after_secs));
    }
    Ok(Caller { catalog, workspace })
}

/// Parses the `appId` path parameter (400 when it is not a UUID).
pub fn app_id_param(raw: &str) -> Result<AppId, ApiError> {
    raw.parse::<AppId>()
        .map_err(|_| ApiError::invalid_request("appId must be a UUID in its hyphenated form"))
}

/// The `placementId` path parameter, checked against D2's key format (400).
pub fn placement_param(key: &str) -> Result<&str, ApiError> {
    validate_placement_key(key)
        .map_err(|e| ApiError::invalid_request(format!("placementId: {e}")))?;
    Ok(key)
}

/// The app as the caller may see it: 404 when it does not exist, 403 when it is another
/// workspace's (D9).
pub fn app(caller: &Caller, app: AppId) -> Result<&App, ApiError> {
    caller
        .catalog
        .app_for(caller.workspace, app)
        .map_err(|e| match e {
            AppAccessError::NotFound => ApiError::app_not_found(),
            AppAccessError::Forbidden => ApiError::forbidden_app(),
        })
}
