//! The deprecated routes (D11): answered as their successors are, with `Deprecation` and a
//! `Link` to the successor.

use actix_web::dev::Payload;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse};
use flowgate_domain::events::reported_event_id;
use flowgate_domain::events::{EventError, EventErrorCode};
use flowgate_domain::ids::AppId;
use serde_json::Value;

use super::events::{events_body, ingest};
use super::or_problem;
use super::resolve::{
    export_mode, resolve_body, resolve_one, resolve_one_sticky, sticky_placement,
};
use crate::guard;
use crate::problem::{ApiError, FieldError};
use crate::response::Reply;
use crate::worker::Worker;

/// Marks a response of a deprecated route: `Deprecation: true` and a `Link` to `successor`.
pub(crate) fn deprecated(mut response: HttpResponse, successor: &str) -> HttpResponse {
    let headers = response.headers_mut();
    headers.insert(
        header::HeaderName::from_static("deprecation"),
        HeaderValue::from_static("true"),
    );
    if let Ok(link) = HeaderValue::from_str(&format!("<{successor}>; rel=\"successor-version\"")) {
        headers.insert(header::LINK, link);
    }
    response
}

/// `POST /v1/placements/{placementId}/resolve` (deprecated, D11), with the path's raw
/// `placementId`: the app comes from the body's `app_id`, or from the key's workspace when it
/// has exactly one app. Returns the reply and the successor route to link to.
pub async fn resolve(
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
    placement: &str,
) -> (Reply, String) {
    let mut successor = format!("/v1/apps/{{appId}}/placements/{placement}/resolve");
    let result = async {
        let caller = guard::authenticate(req, worker)?;
        let key = guard::placement_param(placement)?;
        let mode = export_mode(req)?;
        let mut buf = Vec::new();
        let body = resolve_body(req, payload, worker, &mut buf).await?;
        let app_id = match &body.app_id {
            Some(Value::String(s)) => s.parse::<AppId>().map_err(|_| {
                ApiError::validation(vec![FieldError::new(
                    "app_id",
                    "must be a UUID in its hyphenated form",
                )])
            })?,
            None | Some(Value::Null) => {
                let apps = caller
                    .catalog
                    .workspace(caller.workspace)
                    .map(|w| w.app_ids())
                    .unwrap_or_default();
                match apps {
                    [only] => *only,
                    _ => {
                        return Err(ApiError::validation(vec![FieldError::new(
                            "app_id",
                            "is required: this key's workspace does not have exactly one app",
                        )]))
                    }
                }
            }
            Some(_) => {
                return Err(ApiError::validation(vec![FieldError::new(
                    "app_id",
                    "must be a string",
                )]))
            }
        };
        successor = format!("/v1/apps/{app_id}/placements/{key}/resolve");
        let app = guard::app(&caller, app_id)?;
        match sticky_placement(worker, app, key, mode) {
            Some((placement, sticky)) => {
                Box::pin(resolve_one_sticky(worker, app, placement, sticky, body)).await
            }
            None => resolve_one(worker, app, key, body, mode),
        }
    }
    .await;
    (or_problem(req, result), successor)
}

/// The successor of `POST /v1/events`.
pub(crate) const EVENTS_SUCCESSOR: &str = "/v1/apps/{appId}/events";

/// `POST /v1/events` (deprecated, D11): each event's `app_id` names its app; an event whose app
/// is not in the key's workspace is rejected.
pub async fn events(req: &HttpRequest, payload: Payload, worker: &Worker) -> Reply {
    let result = async {
        let caller = guard::authenticate(req, worker)?;
        let items = events_body(req, payload, worker).await?;
        let workspace = caller.workspace;
        let catalog = caller.catalog.clone();
        ingest(worker, &caller, items, |raw| {
            let parsed = raw
                .get("app_id")
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<AppId>().ok());
            match parsed {
                Some(app) if catalog.app_for(workspace, app).is_ok() => Ok(app),
                Some(_) => Err(EventError {
                    code: EventErrorCode::AppMismatch,
                    field: Some("app_id"),
                    message: "app_id is not an app of this key's workspace".to_owned(),
                    event_id: reported_event_id(raw).map(str::to_owned),
                }),
                // Missing or malformed: validating against the nil app reports exactly what is
                // wrong with the field (missing, type, UUID form) before any app comparison.
                None => Ok(AppId::from_uuid(uuid::Uuid::nil())),
            }
        })
        .await
    }
    .await;
    or_problem(req, result)
}
