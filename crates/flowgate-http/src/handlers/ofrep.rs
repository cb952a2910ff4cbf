//! OpenFeature's remote evaluation protocol (OFREP, D32), under the app: a flag is a
//! placement, its value the single-resolve result. A provider's base URL is
//! `{base_url}/v1/apps/{appId}`.
//!
//! Each evaluation runs resolve's own path: the key and app checks (D9) and limits (D10, D25)
//! of [`guard`], the snapshot, the sticky store where an experiment is sticky (D23), the
//! `resolve_no_flow` events (D8); the context becomes resolve's identity (`targetingKey` the
//! `user_id`, `session_id` and `device_platform` with the contract's rules, every other member
//! an attribute). What OFREP defines is answered its way: 400 `TARGETING_KEY_MISSING`,
//! `INVALID_CONTEXT` or `PARSE_ERROR` and 404 `FLAG_NOT_FOUND` as `{"key", "errorCode",
//! "errorDetails"}`; 401, 403 and 429 as every `/v1` route answers them.

use actix_web::dev::Payload;
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use flowgate_domain::catalog::{App, Placement};
use flowgate_domain::{Resolution, ResolveReason};
use serde_json::{json, Map, Value};

use super::identity::identity;
use super::resolve::{enqueue_server_events, no_flow_event};
use super::{or_problem, Result};
use crate::guard;
use crate::problem::FieldError;
use crate::request_body::{self as body, Encoding};
use crate::resolve_body::{Parsed, ResolveBody};
use crate::response::{json_response, write_result, BodyWriter, Reply};
use crate::router::Endpoint;
use crate::worker::Worker;

/// An OFREP error: its status, code and details (for the flag `key`, when one was asked).
struct Refusal {
    status: StatusCode,
    code: &'static str,
    details: String,
}

impl Refusal {
    fn new(status: StatusCode, code: &'static str, details: impl Into<String>) -> Self {
        Self {
            status,
            code,
            details: details.into(),
        }
    }

    fn response(&self, key: Option<&str>) -> Reply {
        let mut body = json!({"errorCode": self.code, "errorDetails": self.details});
        if let Some(key) = key {
            body["key"] = json!(key);
        }
        json_response(self.status, body.to_string()).into()
    }
}

/// The request's context as a resolve body's JSON: `targetingKey` as `user_id`, `session_id`
/// and `device_platform` as they are, every other member an attribute.
fn resolve_document(document: &[u8]) -> std::result::Result<(Vec<u8>, Value), Refusal> {
    let parse_error = |why: String| Refusal::new(StatusCode::BAD_REQUEST, "PARSE_ERROR", why);
    let request: Value = serde_json::from_slice(document)
        .map_err(|e| parse_error(format!("the body is not JSON: {e}")))?;
    let Value::Object(mut request) = request else {
        return Err(parse_error("the body must be a JSON object".into()));
    };
    let context = match request.remove("context") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(context)) => context,
        Some(other) => {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "INVALID_CONTEXT",
                format!("context must be an object, not {}", kind(&other)),
            ))
        }
    };
    let mut attributes = context.clone();
    let targeting_key = match attributes.remove("targetingKey") {
        Some(Value::String(key)) if !key.is_empty() => key,
        _ => {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "TARGETING_KEY_MISSING",
                "the context needs a targetingKey: the user's stable id",
            ))
        }
    };
    let mut resolve = Map::new();
    resolve.insert("user_id".into(), Value::String(targeting_key));
    for member in ["session_id", "device_platform"] {
        if let Some(value) = attributes.remove(member) {
            resolve.insert(member.into(), value);
        }
    }
    resolve.insert("attributes".into(), Value::Object(attributes));
    let bytes = serde_json::to_vec(&resolve).unwrap_or_default();
    Ok((bytes, Value::Object(context)))
}

fn kind(value: &Value) -> &'static str {
    flowgate_domain::text::json_kind(value)
}

/// The context's field as OFREP names it.
fn context_member(field: &str) -> String {
    match field {
        "user_id" => "targetingKey".to_owned(),
        other => other
            .strip_prefix("attributes.")
            .unwrap_or(other)
            .to_owned(),
    }
}

/// The body's context as a resolve body's bytes, and the context itself; or why not.
async fn context_of(
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
) -> Result<std::result::Result<(Vec<u8>, Value), Refusal>> {
    let document = body::read_document(
        req,
        payload,
        worker.shared.config.resolve_body_limit,
        Encoding::IdentityOnly,
        &worker.shared.config.body_pace,
    )
    .await?;
    Ok(resolve_document(&document))
}

/// The resolve body of `bytes` ([`resolve_document`]'s, always an object).
fn parsed(bytes: &[u8]) -> std::result::Result<ResolveBody<'_>, Refusal> {
    match Parsed::from_slice(bytes) {
        Ok(Parsed::Object(body)) => Ok(body),
        _ => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "PARSE_ERROR",
            "the context could not be read",
        )),
    }
}

/// A context's identity errors as one `INVALID_CONTEXT`, each member named as OFREP names it.
fn invalid_context(errors: &[FieldError]) -> Refusal {
    let details = errors
        .iter()
        .map(|e| format!("{}: {}", context_member(&e.field), e.message))
        .collect::<Vec<_>>()
        .join("; ");
    Refusal::new(StatusCode::BAD_REQUEST, "INVALID_CONTEXT", details)
}

/// One flag's evaluation as OFREP's body: the result as its value, the reason, the variant
/// (the experiment's variant, else the flow version) and flat metadata.
fn evaluation(
    worker: &Worker,
    app: &App,
    key: &str,
    resolution: &Resolution<'_>,
    reason: ResolveReason,
) -> Value {
    let mut written = BodyWriter::contiguous(1024);
    let ttl = worker.shared.config.default_cache_ttl_seconds;
    write_result(&mut written, app, resolution, ttl, None, None);
    let value: Value = serde_json::from_slice(written.buf()).unwrap_or(Value::Null);
    let mut metadata = Map::new();
    for member in [
        "experiment_id",
        "variant_id",
        "flow_version_id",
        "flow_version",
    ] {
        if let Some(found) = value.get(member).filter(|v| !v.is_null()) {
            metadata.insert(member.into(), found.clone());
        }
    }
    let variant = value
        .get("variant_id")
        .or_else(|| value.get("flow_version_id"))
        .filter(|v| v.is_string())
        .cloned();
    let mut evaluated = json!({"key": key, "value": value, "reason": reason.as_str()});
    if let Some(variant) = variant {
        evaluated["variant"] = variant;
    }
    evaluated["metadata"] = Value::Object(metadata);
    evaluated
}

/// Resolves `placement` for `body`'s identity, with the user's stored assignments when it is
/// sticky (D23), records the no-flow event as resolve does (D8), and renders the evaluation.
async fn evaluate(
    worker: &Worker,
    app: &App,
    placement: &Placement,
    body: &mut ResolveBody<'_>,
) -> std::result::Result<Value, Refusal> {
    let mut errors = Vec::new();
    let id = identity(body, &mut errors);
    if !errors.is_empty() {
        return Err(invalid_context(&errors));
    }
    let request = id.request();
    let (resolution, reason) = match &worker.sticky {
        Some(sticky) if placement.is_sticky() => {
            let mut state = sticky.read(app.id(), placement.sticky_ids(&request)).await;
            let resolved = placement.resolve_with_reason(app, &request, Some(&mut state));
            sticky.write_behind(app.id(), &state);
            resolved
        }
        _ => placement.resolve_with_reason(app, &request, None),
    };
    if let Some(event) = no_flow_event(worker, app, placement.key(), &request, &resolution) {
        enqueue_server_events(worker, vec![event]);
    }
    Ok(evaluation(
        worker,
        app,
        placement.key(),
        &resolution,
        reason,
    ))
}

/// One of OFREP's three endpoints (one boxed future for the three, so that the dispatcher's
/// future stays within the allocator's fast path).
pub async fn serve(
    endpoint: Endpoint<'_>,
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
) -> Reply {
    match endpoint {
        Endpoint::OfrepFlag { app, key } => evaluate_flag(req, payload, worker, app, key).await,
        Endpoint::OfrepBulk { app } => evaluate_bulk(req, payload, worker, app).await,
        Endpoint::OfrepConfiguration { app } => configuration(req, worker, app).await,
        _ => super::no_route(req).into(),
    }
}

/// `POST /v1/apps/{appId}/ofrep/v1/evaluate/flags/{key}`: one placement, as single resolve.
async fn evaluate_flag(
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
    app_id: &str,
    key: &str,
) -> Reply {
    let result = async {
        let caller = guard::authenticate(req, worker)?;
        let app_id = guard::app_id_param(app_id)?;
        let app = guard::app(&caller, app_id)?;
        let evaluated = async {
            let (bytes, _) = context_of(req, payload, worker).await??;
            let Some(placement) = app.placement(key) else {
                let why = format!("the app has no placement {key:?}");
                return Err(Refusal::new(StatusCode::NOT_FOUND, "FLAG_NOT_FOUND", why).into());
            };
            let mut body = parsed(&bytes)?;
            Ok(evaluate(worker, app, placement, &mut body).await?)
        }
        .await;
        Ok(match evaluated {
            Ok(evaluated) => json_response(StatusCode::OK, evaluated.to_string()).into(),
            Err(Failed::Refused(refusal)) => refusal.response(Some(key)),
            Err(Failed::Api(e)) => return Err(e),
        })
    }
    .await;
    or_problem(req, result)
}

/// `POST /v1/apps/{appId}/ofrep/v1/evaluate/flags`: every placement of the app, as batch
/// resolve, with a strong `ETag` of the catalog's revision and the context (304 when
/// `If-None-Match` lists it).
async fn evaluate_bulk(
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
    app_id: &str,
) -> Reply {
    let result = async {
        let caller = guard::authenticate(req, worker)?;
        let app_id = guard::app_id_param(app_id)?;
        let app = guard::app(&caller, app_id)?;
        let (bytes, context) = match context_of(req, payload, worker).await? {
            Ok(made) => made,
            Err(refusal) => return Ok(refusal.response(None)),
        };
        let etag = entity_tag(caller.catalog.revision(), &context);
        let tag = HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"\""));
        if if_none_match(req, &etag) {
            return Ok(HttpResponse::NotModified()
                .insert_header((header::ETAG, tag))
                .finish()
                .into());
        }
        let flags = match parsed(&bytes) {
            Ok(mut body) => evaluate_all(worker, app, &mut body).await,
            Err(refusal) => Err(refusal),
        };
        Ok(match flags {
            Ok(flags) => {
                let mut res = json_response(StatusCode::OK, json!({ "flags": flags }).to_string());
                res.headers_mut().insert(header::ETAG, tag);
                res.into()
            }
            Err(refusal) => refusal.response(None),
        })
    }
    .await;
    or_problem(req, result)
}

/// Every placement of `app` for `body`'s identity, the sticky documents read once (D23).
async fn evaluate_all(
    worker: &Worker,
    app: &App,
    body: &mut ResolveBody<'_>,
) -> std::result::Result<Vec<Value>, Refusal> {
    let mut errors = Vec::new();
    let id = identity(body, &mut errors);
    if !errors.is_empty() {
        return Err(invalid_context(&errors));
    }
    let request = id.request();
    let keys = app.placement_keys();
    let placements: Vec<&Placement> = keys.iter().filter_map(|k| app.placement(k)).collect();
    let sticky_ids = match &worker.sticky {
        Some(_) => app.sticky_ids(keys.iter().copied(), &request),
        None => Vec::new(),
    };
    let mut state = match (&worker.sticky, sticky_ids.is_empty()) {
        (Some(sticky), false) => Some(sticky.read(app.id(), sticky_ids).await),
        _ => None,
    };
    let mut flags = Vec::with_capacity(placements.len());
    let mut events = Vec::new();
    for placement in placements {
        let sticky = state.as_mut().filter(|_| placement.is_sticky());
        let (resolution, reason) = placement.resolve_with_reason(app, &request, sticky);
        events.extend(no_flow_event(
            worker,
            app,
            placement.key(),
            &request,
            &resolution,
        ));
        flags.push(evaluation(
            worker,
            app,
            placement.key(),
            &resolution,
            reason,
        ));
    }
    if let (Some(sticky), Some(state)) = (&worker.sticky, &state) {
        sticky.write_behind(app.id(), state);
    }
    enqueue_server_events(worker, events);
    Ok(flags)
}

/// The bulk evaluation's entity tag: a digest of the catalog's revision and the context in
/// canonical form (members sorted, so their order does not matter), strong and quoted.
fn entity_tag(revision: u64, context: &Value) -> String {
    let mut data = revision.to_be_bytes().to_vec();
    // serde_json's maps are sorted by key: the text is canonical.
    data.extend_from_slice(context.to_string().as_bytes());
    let digest = ring::digest::digest(&ring::digest::SHA256, &data);
    let hex: String = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("\"{hex}\"")
}

/// Whether the request's `If-None-Match` lists `etag` (or is `*`).
fn if_none_match(req: &HttpRequest, etag: &str) -> bool {
    req.headers()
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag == etag || tag.strip_prefix("W/") == Some(etag))
}

/// `GET /v1/apps/{appId}/ofrep/v1/configuration`: polling no faster than the catalog is
/// refreshed, and object flags.
async fn configuration(req: &HttpRequest, worker: &Worker, app_id: &str) -> Reply {
    let result = async {
        let caller = guard::authenticate(req, worker)?;
        let app_id = guard::app_id_param(app_id)?;
        guard::app(&caller, app_id)?;
        let interval = worker.shared.config.catalog_refresh_interval.as_millis();
        let body = json!({
            "name": "flowgate",
            "capabilities": {
                "cacheInvalidation": {
                    "polling": {"enabled": true, "minPollingIntervalMs": interval},
                },
                "flagEvaluation": {"supportedTypes": ["object"]},
            },
        });
        Ok(json_response(StatusCode::OK, body.to_string()).into())
    }
    .await;
    or_problem(req, result)
}

/// Why an evaluation has no result: OFREP's own refusal, or the API's (401, 403, 429, a body
/// too large or too slow).
enum Failed {
    Refused(Refusal),
    Api(crate::problem::ApiError),
}

impl From<Refusal> for Failed {
    fn from(refusal: Refusal) -> Self {
        Failed::Refused(refusal)
    }
}

impl From<crate::problem::ApiError> for Failed {
    fn from(e: crate::problem::ApiError) -> Self {
        Failed::Api(e)
    }
}
