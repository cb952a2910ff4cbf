//! Event ingestion (D7, D15).

use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::HttpRequest;
use flowgate_domain::events::{validate_event, EventError};
use flowgate_domain::ids::AppId;
use serde::Serialize;
use serde_json::Value;

use super::{or_problem, Result};
use crate::config::{MAX_EVENTS_PER_REQUEST, MAX_EVENT_ERRORS};
use crate::guard::{self, Caller};
use crate::problem::ApiError;
use crate::request_body::{read_json, Encoding};
use crate::response::{json_response, Reply};
use crate::worker::Worker;

/// One entry of the events response's `errors` (D7).
#[derive(Serialize)]
struct EventErrorItem {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_id: Option<String>,
    code: &'static str,
    message: String,
}

#[derive(Serialize)]
struct EventsAccepted {
    accepted: usize,
    rejected: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<EventErrorItem>,
}

/// The events of a body: one object or an array of 1..=100 (D7).
fn event_list(body: Value) -> Result<Vec<Value>> {
    match body {
        Value::Object(_) => Ok(vec![body]),
        Value::Array(items) if items.is_empty() => {
            Err(ApiError::invalid_request("the array of events is empty"))
        }
        Value::Array(items) if items.len() > MAX_EVENTS_PER_REQUEST => Err(
            ApiError::too_many_events(items.len(), MAX_EVENTS_PER_REQUEST),
        ),
        Value::Array(items) => Ok(items),
        _ => Err(ApiError::invalid_request(
            "the body must be an event object or an array of events",
        )),
    }
}

/// Reads an events body (gzip allowed, limit on the decoded size) into its list of events.
pub(super) async fn events_body(
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
) -> Result<Vec<Value>> {
    event_list(
        read_json(
            req,
            payload,
            worker.shared.config.events_body_limit,
            Encoding::AllowGzip,
            &worker.shared.config.body_pace,
        )
        .await?,
    )
}

/// Validates each event with `app_of` choosing the app it is checked against, enqueues the
/// accepted ones all at once, waits until the sink says they are stored (D15: with
/// `events.ack = "stored"`, their batch committed), and answers 202; or 503 when the sink
/// refuses them (D7) or does not store them within `events.ack_timeout_ms` (they stay queued,
/// the SDK's retry is counted once).
///
/// Room in the sink is asked for only now, for the accepted events, once the body was read
/// and validated (D25): a client that declares a body and never sends it holds no queue slot.
/// The sink may make the request wait, in arrival order, up to `events.admission_wait_ms` for
/// its writers to free room.
pub(super) async fn ingest(
    worker: &Worker,
    caller: &Caller,
    items: Vec<Value>,
    app_of: impl Fn(&Value) -> std::result::Result<AppId, EventError>,
) -> Result<Reply> {
    let now = worker.shared.clock.now();
    let mut accepted = Vec::with_capacity(items.len());
    let mut errors = Vec::new();
    let mut rejected = 0;
    for (index, raw) in items.iter().enumerate() {
        let outcome = app_of(raw).and_then(|app| {
            validate_event(
                raw,
                app,
                &**caller.catalog,
                now,
                &worker.shared.config.event_limits,
            )
        });
        match outcome {
            Ok(event) => accepted.push(event),
            Err(e) => {
                rejected += 1;
                worker.shared.metrics.event_rejected(e.code.as_str());
                if errors.len() < MAX_EVENT_ERRORS {
                    errors.push(EventErrorItem {
                        index,
                        event_id: e.event_id.clone(),
                        code: e.code.as_str(),
                        message: e.message.clone(),
                    });
                }
            }
        }
    }
    let count = accepted.len();
    if count > 0 {
        let admission = worker.shared.sink.admit(count).await.map_err(|o| {
            worker.shared.metrics.events_refused(count);
            ApiError::overloaded(o.retry_after_secs)
        })?;
        let receipt = admission.enqueue(accepted).map_err(|o| {
            worker.shared.metrics.events_refused(count);
            ApiError::overloaded(o.retry_after_secs)
        })?;
        receipt.await.map_err(|o| {
            worker.shared.metrics.events_not_stored_in_time(count);
            ApiError::overloaded(o.retry_after_secs)
        })?;
    }
    worker.shared.metrics.events_accepted(count);
    let body = serde_json::to_vec(&EventsAccepted {
        accepted: count,
        rejected,
        errors,
    })
    .map_err(|_| ApiError::internal())?;
    Ok(json_response(StatusCode::ACCEPTED, body).into())
}

/// `POST /v1/apps/{appId}/events`, with the path's raw `appId`.
pub async fn events(req: &HttpRequest, payload: Payload, worker: &Worker, app_id: &str) -> Reply {
    let result = async {
        let caller = guard::authenticate(req, worker)?;
        let app_id = guard::app_id_param(app_id)?;
        guard::app(&caller, app_id)?;
        let items = events_body(req, payload, worker).await?;
        ingest(worker, &caller, items, |_| Ok(app_id)).await
    }
    .await;
    or_problem(req, result)
}
