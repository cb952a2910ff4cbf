//! Store notifications (D30): `POST /v1/apps/{appId}/store/apple` (App Store Server
//! Notifications V2, authenticated by Apple's signature) and `POST
//! /v1/apps/{appId}/store/revenuecat` (authenticated by a webhook key). Each is verified, read,
//! stored once and only then answered 200 (D15's promise); what cannot be verified is 401, what
//! cannot be read or does not belong to the app is 400, and nothing of either is stored. An
//! app not in the catalog is 404 `app_not_found`, as on every app route; an app not set up for
//! the App Store (no `apple_bundle_id`) is 409 `store_not_configured`.

use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::HttpRequest;
use flowgate_domain::ids::AppId;
use flowgate_domain::store_notifications::{
    apple_bundle, read_apple, read_revenuecat, NotificationError, StoreNotification, MAX_BODY,
};
use serde_json::Value;

use super::{or_problem, Result};
use crate::apple_jws::{verify, AppleRoots};
use crate::guard;
use crate::problem::ApiError;
use crate::request_body::{read_json, Encoding};
use crate::response::{json_response, Reply};
use crate::state::StoreRoutes;
use crate::worker::Worker;

fn invalid(e: &NotificationError) -> ApiError {
    ApiError::invalid_notification(format!("{}: {}", e.pointer, e.message))
}

/// The routes' state, or 404 when the deployment serves none.
fn routes(worker: &Worker) -> Result<&StoreRoutes> {
    worker
        .shared
        .store_routes
        .as_deref()
        .ok_or_else(ApiError::not_found)
}

/// The client's rate limit, as on every `/v1` route (D10, D25).
fn client_limit(req: &HttpRequest, worker: &Worker) -> Result<()> {
    let state = &worker.shared;
    let client = state.ip_limiter.check(&guard::client_address(req, state));
    if client.allowed {
        Ok(())
    } else {
        state.metrics.rate_limited("ip");
        Err(ApiError::rate_limited(client.retry_after_secs))
    }
}

/// Stores `notification` and answers 200 `{"stored": true}`, or `false` for a replay.
async fn store(routes: &StoreRoutes, notification: &StoreNotification) -> Result<Reply> {
    let new = routes
        .store
        .record_notification(notification)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, source = notification.source.as_str(), "a store notification could not be stored");
            ApiError::overloaded(5)
        })?;
    tracing::info!(
        source = notification.source.as_str(),
        notification_type = %notification.notification_type,
        new,
        "store notification"
    );
    let body = serde_json::to_vec(&serde_json::json!({ "stored": new }))
        .map_err(|_| ApiError::internal())?;
    Ok(json_response(StatusCode::OK, body).into())
}

/// The body, at most [`MAX_BODY`] bytes of JSON.
async fn body(req: &HttpRequest, payload: Payload, worker: &Worker) -> Result<Value> {
    read_json(
        req,
        payload,
        MAX_BODY,
        Encoding::IdentityOnly,
        &worker.shared.config.body_pace,
    )
    .await
}

/// A nested JWS of Apple's payload (`data.signedTransactionInfo`, `data.signedRenewalInfo`),
/// verified as the payload was.
fn nested(
    roots: &AppleRoots,
    payload: &Value,
    name: &str,
    now: time::OffsetDateTime,
) -> Result<Option<Value>> {
    match payload.get("data").and_then(|d| d.get(name)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(jws)) => verify(roots, jws, now)
            .map(Some)
            .map_err(|e| ApiError::invalid_signature(format!("data.{name}: {e} ({})", e.code()))),
        Some(_) => Err(ApiError::invalid_notification(format!(
            "/data/{name}: must be a signed JWS string"
        ))),
    }
}

/// `POST /v1/apps/{appId}/store/apple`, with the path's raw `appId`.
pub(crate) async fn apple(
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
    app_id: &str,
) -> Reply {
    let result = async {
        let routes = routes(worker)?;
        client_limit(req, worker)?;
        let app_id = guard::app_id_param(app_id)?;
        let catalog = worker.snapshot();
        // An unknown app is 404 as on every app route; a known one without a bundle id is
        // 409: its configuration, not the request, stands in the way.
        let app = catalog.app(app_id).ok_or_else(ApiError::app_not_found)?;
        let Some((bundle, environments)) = apple_app(app) else {
            return Err(ApiError::store_not_configured(app_id));
        };
        let body = body(req, payload, worker).await?;
        let Some(Value::String(signed)) = body.get("signedPayload") else {
            return Err(ApiError::invalid_notification(
                "the body must be Apple's {\"signedPayload\": \"<JWS>\"}",
            ));
        };
        if !is_compact_jws(signed) {
            return Err(ApiError::invalid_notification(format!(
                "/signedPayload: must be a compact JWS (three base64url parts joined by dots), not {}",
                crate::problem::quoted(signed)
            )));
        }
        let now = worker.shared.clock.now();
        let roots = &routes.apple_roots;
        let notification = verify(roots, signed, now).map_err(|e| {
            ApiError::invalid_signature(format!("signedPayload: {e} ({})", e.code()))
        })?;
        let transaction = nested(roots, &notification, "signedTransactionInfo", now)?;
        let renewal = nested(roots, &notification, "signedRenewalInfo", now)?;
        check_app(&notification, transaction.as_ref(), &bundle, &environments)?;
        let read = read_apple(
            app_id,
            &notification,
            transaction.as_ref(),
            renewal.as_ref(),
        )
        .map_err(|e| invalid(&e))?;
        store(routes, &read).await
    }
    .await;
    or_problem(req, result)
}

/// The shape of a compact JWS, [`JWS_PATTERN`]: a header and a payload of base64url
/// characters and a signature of them, possibly empty, joined by two dots. What has another
/// shape is not a notification at all (400, quoted); an empty signature has the shape, and is
/// refused by the verification (401 `invalid_signature`) as every unsigned JWS is.
fn is_compact_jws(text: &str) -> bool {
    let base64url = |part: &str| {
        part.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let mut parts = text.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(header), Some(payload), Some(signature), None) => {
            !header.is_empty()
                && !payload.is_empty()
                && base64url(header)
                && base64url(payload)
                && base64url(signature)
        }
        _ => false,
    }
}

/// [`is_compact_jws`] as a regular expression, for the OpenAPI document.
pub(crate) const JWS_PATTERN: &str = r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$";

/// The app's `apple_bundle_id` and `apple_environments` (D30), when it takes App Store
/// notifications.
fn apple_app(app: &flowgate_domain::catalog::App) -> Option<(String, Vec<String>)> {
    let bundle = app.apple_bundle_id()?;
    Some((bundle.to_owned(), app.apple_environments().to_vec()))
}

/// Apple's notification (and its transaction) are of the app's bundle and one of its
/// environments (D30).
fn check_app(
    notification: &Value,
    transaction: Option<&Value>,
    bundle: &str,
    environments: &[String],
) -> Result<()> {
    let (their_bundle, environment) = apple_bundle(notification);
    let their_bundle =
        their_bundle.ok_or_else(|| ApiError::invalid_notification("/data/bundleId: is missing"))?;
    if their_bundle != bundle {
        return Err(ApiError::store_mismatch(format!(
            "the notification is for bundle {}, and this app's apple_bundle_id is {bundle:?}",
            crate::problem::quoted(their_bundle)
        )));
    }
    let environment = environment.unwrap_or("Production");
    if !environments.iter().any(|e| e == environment) {
        return Err(ApiError::store_mismatch(format!(
            "the notification is of environment {}, and this app takes {}",
            crate::problem::quoted(environment),
            environments.join(", ")
        )));
    }
    if let Some(t) = transaction {
        if let Some(b) = t.get("bundleId").and_then(Value::as_str) {
            if b != bundle {
                return Err(ApiError::store_mismatch(format!(
                    "the transaction is for bundle {}, and this app's apple_bundle_id is {bundle:?}",
                    crate::problem::quoted(b)
                )));
            }
        }
    }
    Ok(())
}

/// `POST /v1/apps/{appId}/store/revenuecat`, with the path's raw `appId`.
pub(crate) async fn revenuecat(
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
    app_id: &str,
) -> Reply {
    let result = async {
        let routes = routes(worker)?;
        client_limit(req, worker)?;
        let catalog = worker.snapshot();
        let authorization = crate::authorization::authorization_value(req.headers())?;
        // The key first (D9), then the app: a malformed id is checked against no app.
        let app = guard::app_id_param(app_id);
        let probe = app
            .as_ref()
            .copied()
            .unwrap_or_else(|_| AppId::from_uuid(uuid::Uuid::nil()));
        let auth = crate::authorization::authenticate_webhook(
            &catalog,
            authorization,
            probe,
            worker.shared.config.key_environment,
        );
        let (record, app) = match (auth, app) {
            (Err(e), _) if e.status == StatusCode::UNAUTHORIZED => return Err(e),
            (_, Err(e)) | (Err(e), Ok(_)) => return Err(e),
            (Ok(record), Ok(app)) => (record, app),
        };
        let key = worker.shared.key_limiter.check(&record.id);
        if !key.allowed {
            worker.shared.metrics.rate_limited("key");
            return Err(ApiError::rate_limited(key.retry_after_secs));
        }
        let body = body(req, payload, worker).await?;
        let read = read_revenuecat(app, &body).map_err(|e| invalid(&e))?;
        store(routes, &read).await
    }
    .await;
    or_problem(req, result)
}
