//! The `/v1` handlers. Each one runs the D9 checks in order, then reads and validates its body,
//! and answers either its result or a problem (the only error path, so every error carries the
//! request id).

use std::borrow::Cow;

use actix_web::body::MessageBody;
use actix_web::dev::Payload;
use actix_web::http::header::{self, ContentEncoding, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use flowgate_domain::catalog::App;
use flowgate_domain::events::{
    is_storable_text, validate_event, AnalyticsEvent, EventError, EventErrorCode,
};
use flowgate_domain::ids::{AppId, EventId};
use flowgate_domain::ports::Admission;
use flowgate_domain::resolve::{dedup_keys, BatchError};
use flowgate_domain::{Platform, Resolution, ResolveMode, ResolveRequest};
use serde::Serialize;
use serde_json::Value;

use crate::body::{self, read_json, Encoding};
use crate::config::{MAX_EVENTS_PER_REQUEST, MAX_EVENT_ERRORS};
use crate::guard::{self, Caller};
use crate::middleware::request_id_of;
use crate::problem::{ApiError, FieldError};
use crate::render::{write_result, Spliced};
use crate::resolve_body::{Attrs, BodyAttributes, Field, Parsed, ResolveBody};
use crate::worker::Worker;

type Result<T, E = ApiError> = std::result::Result<T, E>;

fn answer(req: &HttpRequest, result: Result<HttpResponse>) -> HttpResponse {
    result.unwrap_or_else(|e| e.to_response(&request_id_of(req)))
}

fn json_response(status: StatusCode, body: impl MessageBody + 'static) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        ))
        .body(body)
}

/// Identity fields of resolve and batch bodies (contract: identity fields).
pub(crate) struct Identity<'a> {
    user_id: Cow<'a, str>,
    session_id: Cow<'a, str>,
    platform: Platform,
    attributes: BodyAttributes<'a>,
}

impl Identity<'_> {
    /// The resolve request of this identity.
    pub(crate) fn request(&self) -> ResolveRequest<'_> {
        ResolveRequest::new(
            &self.user_id,
            &self.session_id,
            self.platform,
            &self.attributes,
        )
    }
}

fn string_field<'a>(field: Field<'a>, name: &str, errors: &mut Vec<FieldError>) -> Cow<'a, str> {
    match field {
        Field::Missing | Field::Null => {
            errors.push(FieldError::new(name, "is required"));
            Cow::Borrowed("")
        }
        Field::Str(s) if !(1..=256).contains(&s.chars().count()) => {
            errors.push(FieldError::new(name, "must be 1 to 256 characters"));
            Cow::Borrowed("")
        }
        // D8: the `resolve_no_flow` event stores the identity, and the store cannot keep NUL.
        Field::Str(s) if !is_storable_text(&s) => {
            errors.push(FieldError::new(
                name,
                "must not contain the NUL character (U+0000)",
            ));
            Cow::Borrowed("")
        }
        Field::Str(s) => s,
        Field::NotString => {
            errors.push(FieldError::new(name, "must be a string"));
            Cow::Borrowed("")
        }
    }
}

/// Takes the identity members out of the body (moved, not copied).
pub(crate) fn identity<'a>(
    body: &mut ResolveBody<'a>,
    errors: &mut Vec<FieldError>,
) -> Identity<'a> {
    let user_id = string_field(std::mem::take(&mut body.user_id), "user_id", errors);
    let session_id = string_field(std::mem::take(&mut body.session_id), "session_id", errors);
    let platform = match &body.device_platform {
        Field::Missing | Field::Null => {
            errors.push(FieldError::new("device_platform", "is required"));
            Platform::Web
        }
        Field::Str(s) => Platform::parse(s).unwrap_or_else(|| {
            errors.push(FieldError::new(
                "device_platform",
                "must be one of ios, android, web",
            ));
            Platform::Web
        }),
        Field::NotString => {
            errors.push(FieldError::new(
                "device_platform",
                "must be a string: ios, android or web",
            ));
            Platform::Web
        }
    };
    let attributes = match std::mem::take(&mut body.attributes) {
        Attrs::Missing | Attrs::Null => BodyAttributes::default(),
        Attrs::Object(attributes) => attributes,
        Attrs::NotObject => {
            errors.push(FieldError::new("attributes", "must be an object"));
            BodyAttributes::default()
        }
    };
    Identity {
        user_id,
        session_id,
        platform,
        attributes,
    }
}

/// `?export=true|false` (D3.5): any other value is a 400.
fn export_mode(req: &HttpRequest) -> Result<ResolveMode> {
    let mut mode = ResolveMode::Normal;
    for pair in req.query_string().split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name == "export" {
            mode = match value {
                "true" => ResolveMode::Export,
                "false" => ResolveMode::Normal,
                _ => return Err(ApiError::invalid_request("export must be true or false")),
            };
        }
    }
    Ok(mode)
}

/// Records `resolve_no_flow` (D8) for a no-flow outcome; best effort under overload.
fn record_no_flow(
    state: &Worker,
    app: &App,
    key: &str,
    request: &ResolveRequest<'_>,
    resolution: &Resolution<'_>,
    events: &mut Vec<AnalyticsEvent>,
) {
    // The clock is read only for a no-flow outcome: most resolves serve a flow.
    if !state.config.record_resolve_no_flow || resolution.no_flow_reason().is_none() {
        return;
    }
    let now = state.clock.now();
    if let Some(event) = resolution.no_flow_event(app, key, request, EventId::new_v7(now), now) {
        events.push(event);
    }
}

fn enqueue_server_events(state: &Worker, events: Vec<AnalyticsEvent>) {
    if events.is_empty() {
        return;
    }
    let count = events.len();
    // Server events are the service's own records, not events a client was told were accepted:
    // under overload they are dropped (and counted) rather than failing the resolve.
    if state.sink.try_enqueue(events).is_err() {
        state.metrics.server_events_dropped(count);
        tracing::warn!(
            count,
            "resolve_no_flow events dropped: the event buffer is full"
        );
    }
}

/// Resolves one placement for a parsed body and renders the result (single and legacy routes).
fn resolve_one(
    state: &Worker,
    coding: ContentEncoding,
    app: &App,
    key: &str,
    mut body: ResolveBody<'_>,
    mode: ResolveMode,
) -> Result<HttpResponse> {
    let mut errors = Vec::new();
    let id = identity(&mut body, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let request = id.request();
    let resolution = app.resolve(key, &request, mode);
    let mut body = Spliced::with_capacity(512);
    write_result(
        &mut body,
        app,
        &resolution,
        state.config.default_cache_ttl_seconds,
        None,
        None,
    );
    // D3.5: export never records events.
    if mode == ResolveMode::Normal {
        let mut events = Vec::new();
        record_no_flow(state, app, key, &request, &resolution, &mut events);
        enqueue_server_events(state, events);
    }
    Ok(respond(state, coding, body))
}

/// A 200 with a resolve or batch body in `coding`, the response coding the dispatcher
/// negotiated (`middleware::response_coding`). For gzip, a body holding shared flows goes out
/// as one gzip member in which each flow is compressed once per version
/// (`Spliced::finish_gzip`), so no compressor runs for the response; any other body to be
/// compressed is joined into one chunk for the dispatcher's compressor
/// (`Spliced::finish_joined`).
fn respond(state: &Worker, coding: ContentEncoding, body: Spliced) -> HttpResponse {
    let body = match coding {
        ContentEncoding::Identity => return json_response(StatusCode::OK, body.finish()),
        ContentEncoding::Gzip => body.finish_gzip(&state.deflated_flows),
        _ => Err(body),
    };
    match body {
        Ok(compressed) => {
            let mut res = json_response(StatusCode::OK, compressed);
            let headers = res.headers_mut();
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
            res
        }
        Err(body) => json_response(StatusCode::OK, body.finish_joined()),
    }
}

async fn resolve_body<'b>(
    req: &HttpRequest,
    payload: Payload,
    state: &Worker,
    buf: &'b mut Vec<u8>,
) -> Result<ResolveBody<'b>> {
    *buf = body::read_document(
        req,
        payload,
        state.config.resolve_body_limit,
        Encoding::IdentityOnly,
    )
    .await?;
    match Parsed::from_slice(buf).map_err(body::not_json)? {
        Parsed::Object(body) => Ok(body),
        Parsed::NotObject => Err(ApiError::invalid_request("the body must be a JSON object")),
    }
}

/// `POST /v1/apps/{appId}/placements/{placementId}/resolve`, with the path's raw segments.
pub async fn resolve(
    req: &HttpRequest,
    payload: Payload,
    state: &Worker,
    coding: ContentEncoding,
    app_id: &str,
    key: &str,
) -> HttpResponse {
    let result = async {
        let caller = guard::authenticate(req, state)?;
        let app_id = guard::app_id_param(app_id)?;
        let key = guard::placement_param(key)?;
        let app = guard::app(&caller, app_id)?;
        let mode = export_mode(req)?;
        let mut buf = Vec::new();
        let body = resolve_body(req, payload, state, &mut buf).await?;
        resolve_one(state, coding, app, key, body, mode)
    }
    .await;
    answer(req, result)
}

/// `POST /v1/apps/{appId}/placements/resolve-batch`, with the path's raw `appId`.
pub async fn resolve_batch(
    req: &HttpRequest,
    payload: Payload,
    state: &Worker,
    coding: ContentEncoding,
    app_id: &str,
) -> HttpResponse {
    let result = async {
        let caller = guard::authenticate(req, state)?;
        let app_id = guard::app_id_param(app_id)?;
        let app = guard::app(&caller, app_id)?;
        let mut buf = Vec::new();
        let mut body = resolve_body(req, payload, state, &mut buf).await?;
        let mut errors = Vec::new();
        let keys: Vec<String> = match &body.placement_keys {
            None | Some(Value::Null) => {
                errors.push(FieldError::new("placement_keys", "is required"));
                Vec::new()
            }
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, v)| match v {
                    Value::String(s) => Some(s.clone()),
                    _ => {
                        errors.push(FieldError::new(
                            format!("placement_keys[{i}]"),
                            "must be a string",
                        ));
                        None
                    }
                })
                .collect(),
            Some(_) => {
                errors.push(FieldError::new(
                    "placement_keys",
                    "must be an array of strings",
                ));
                Vec::new()
            }
        };
        let id = identity(&mut body, &mut errors);
        if !errors.is_empty() {
            return Err(ApiError::validation(errors));
        }
        let keys = dedup_keys(&keys).map_err(|e| match e {
            BatchError::Empty => {
                ApiError::validation(vec![FieldError::new("placement_keys", "must not be empty")])
            }
            BatchError::TooManyPlacements { distinct } => ApiError::too_many_placements(distinct),
            BatchError::InvalidKey { index, error } => ApiError::validation(vec![FieldError::new(
                format!("placement_keys[{index}]"),
                error.to_string(),
            )]),
        })?;
        let request = id.request();
        let resolutions: Vec<_> = keys
            .iter()
            .map(|key| (key, app.resolve(key, &request, ResolveMode::Normal)))
            .collect();
        // Uncompressed, one contiguous chunk sized up front (see `Spliced`: batches carry many
        // flows). For gzip, the flows are spliced in, to be sent as compressed once per version:
        // compressing a batch of 50 flows per request cost about 0.9 ms of CPU.
        let mut body = if coding == ContentEncoding::Gzip {
            Spliced::with_capacity(1024)
        } else {
            let size: usize = resolutions
                .iter()
                .map(|(_, r)| {
                    r.version().map_or(256, |v| {
                        v.flow_schema.get().len() + v.fonts_json.get().len() + 512
                    })
                })
                .sum();
            Spliced::contiguous(size + 64)
        };
        body.buf().extend_from_slice(b"{\"results\":[");
        let mut events = Vec::new();
        for (i, (key, resolution)) in resolutions.iter().enumerate() {
            if i > 0 {
                body.buf().push(b',');
            }
            let error = resolution
                .no_flow_reason()
                .filter(|r| *r == flowgate_domain::events::NoFlowReason::FlowUnpublished)
                .map(|r| r.as_str());
            write_result(
                &mut body,
                app,
                resolution,
                state.config.default_cache_ttl_seconds,
                Some(key),
                error,
            );
            record_no_flow(state, app, key, &request, resolution, &mut events);
        }
        body.buf().extend_from_slice(b"]}");
        enqueue_server_events(state, events);
        Ok(respond(state, coding, body))
    }
    .await;
    answer(req, result)
}

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

/// Holds room in the sink for a full request ([`MAX_EVENTS_PER_REQUEST`] events) before the
/// body is read (D7). The sink may make the request wait, in arrival order, for its writers
/// to free room. When it refuses, the body is read and dropped unparsed (which keeps the
/// connection usable) and the request gets 503 `overloaded`: nothing of it was accepted, and
/// an overloaded server spends no CPU parsing events it cannot take.
async fn admit<'s>(state: &'s Worker, payload: &mut Payload) -> Result<Box<dyn Admission + 's>> {
    match state.sink.admit(MAX_EVENTS_PER_REQUEST).await {
        Ok(admission) => Ok(admission),
        Err(o) => {
            body::discard(payload, state.config.events_body_limit).await;
            state.metrics.event_request_refused_unread();
            Err(ApiError::overloaded(o.retry_after_secs))
        }
    }
}

/// Reads an events body (gzip allowed, limit on the decoded size) into its list of events.
async fn events_body(req: &HttpRequest, payload: Payload, state: &Worker) -> Result<Vec<Value>> {
    event_list(
        read_json(
            req,
            payload,
            state.config.events_body_limit,
            Encoding::AllowGzip,
        )
        .await?,
    )
}

/// Validates each event with `app_of` choosing the app it is checked against, enqueues the
/// accepted ones all at once, waits until the sink says they are stored (D15: with
/// `events.ack = "stored"`, their batch committed), and answers 202; or 503 when the sink
/// refuses them (D7) or does not store them within `events.ack_timeout_ms` (they stay queued,
/// the SDK's retry is counted once).
async fn ingest(
    state: &Worker,
    caller: &Caller,
    admission: Box<dyn Admission + '_>,
    items: Vec<Value>,
    app_of: impl Fn(&Value) -> std::result::Result<AppId, EventError>,
) -> Result<HttpResponse> {
    let now = state.clock.now();
    let mut accepted = Vec::with_capacity(items.len());
    let mut errors = Vec::new();
    let mut rejected = 0;
    for (index, raw) in items.iter().enumerate() {
        let outcome = app_of(raw).and_then(|app| {
            validate_event(raw, app, &**caller.catalog, now, &state.config.event_limits)
        });
        match outcome {
            Ok(event) => accepted.push(event),
            Err(e) => {
                rejected += 1;
                state.metrics.event_rejected(e.code.as_str());
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
        let receipt = admission.enqueue(accepted).map_err(|o| {
            state.metrics.events_refused(count);
            ApiError::overloaded(o.retry_after_secs)
        })?;
        receipt.await.map_err(|o| {
            state.metrics.events_not_stored_in_time(count);
            ApiError::overloaded(o.retry_after_secs)
        })?;
    }
    state.metrics.events_accepted(count);
    let body = serde_json::to_vec(&EventsAccepted {
        accepted: count,
        rejected,
        errors,
    })
    .map_err(|_| ApiError::internal())?;
    Ok(json_response(StatusCode::ACCEPTED, body))
}

/// `POST /v1/apps/{appId}/events`, with the path's raw `appId`.
pub async fn events(
    req: &HttpRequest,
    mut payload: Payload,
    state: &Worker,
    app_id: &str,
) -> HttpResponse {
    let result = async {
        let caller = guard::authenticate(req, state)?;
        let app_id = guard::app_id_param(app_id)?;
        guard::app(&caller, app_id)?;
        let admission = admit(state, &mut payload).await?;
        let items = events_body(req, payload, state).await?;
        ingest(state, &caller, admission, items, |_| Ok(app_id)).await
    }
    .await;
    answer(req, result)
}

fn deprecated(mut response: HttpResponse, successor: &str) -> HttpResponse {
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
/// has exactly one app.
pub async fn legacy_resolve(
    req: &HttpRequest,
    payload: Payload,
    state: &Worker,
    coding: ContentEncoding,
    placement: &str,
) -> HttpResponse {
    let mut successor = format!("/v1/apps/{{appId}}/placements/{placement}/resolve");
    let result = async {
        let caller = guard::authenticate(req, state)?;
        let key = guard::placement_param(placement)?;
        let mode = export_mode(req)?;
        let mut buf = Vec::new();
        let body = resolve_body(req, payload, state, &mut buf).await?;
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
                    .map(|w| w.app_ids.as_slice())
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
        resolve_one(state, coding, app, key, body, mode)
    }
    .await;
    deprecated(answer(req, result), &successor)
}

/// `POST /v1/events` (deprecated, D11): each event's `app_id` names its app; an event whose app
/// is not in the key's workspace is rejected.
pub async fn legacy_events(
    req: &HttpRequest,
    mut payload: Payload,
    state: &Worker,
) -> HttpResponse {
    let result = async {
        let caller = guard::authenticate(req, state)?;
        let admission = admit(state, &mut payload).await?;
        let items = events_body(req, payload, state).await?;
        let workspace = caller.workspace;
        let catalog = caller.catalog.clone();
        ingest(state, &caller, admission, items, |raw| {
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
                    event_id: raw
                        .get("event_id")
                        .and_then(Value::as_str)
                        .filter(|s| s.len() <= 256)
                        .map(str::to_owned),
                }),
                // Missing or malformed: validating against the nil app reports exactly what is
                // wrong with the field (missing, type, UUID form) before any app comparison.
                None => Ok(AppId::from_uuid(uuid::Uuid::nil())),
            }
        })
        .await
    }
    .await;
    deprecated(answer(req, result), "/v1/apps/{appId}/events")
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
