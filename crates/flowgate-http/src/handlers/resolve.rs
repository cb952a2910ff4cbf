//! Single and batch resolve (D3, D6).

use std::rc::Rc;

use actix_web::dev::Payload;
use actix_web::http::header::ContentEncoding;
use actix_web::HttpRequest;
use flowgate_domain::catalog::{App, Placement};
use flowgate_domain::events::{AnalyticsEvent, NoFlowReason};
use flowgate_domain::ids::EventId;
use flowgate_domain::resolve::{dedup_keys, BatchError};
use flowgate_domain::{Resolution, ResolveMode, ResolveRequest};
use serde_json::Value;

use super::identity::identity;
use super::{or_problem, Result};
use crate::guard;
use crate::problem::{ApiError, FieldError};
use crate::request_body::{self as body, Encoding};
use crate::resolve_body::{Parsed, ResolveBody};
use crate::response::{compression, write_result, BodyWriter, Reply};
use crate::sticky::WorkerReads;
use crate::worker::Worker;

/// `?export=true|false` (D3.5): any other value is a 400.
pub(super) fn export_mode(req: &HttpRequest) -> Result<ResolveMode> {
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

/// The `resolve_no_flow` event (D8) to record for a no-flow outcome, if any. For an unknown
/// placement it takes one of the app's allowance for the minute (D25), or counts the event as
/// suppressed.
pub(super) fn no_flow_event(
    worker: &Worker,
    app: &App,
    key: &str,
    request: &ResolveRequest<'_>,
    resolution: &Resolution<'_>,
) -> Option<AnalyticsEvent> {
    // The clock is read only for a no-flow outcome: most resolves serve a flow.
    let reason = resolution.no_flow_reason()?;
    if !worker.shared.config.record_resolve_no_flow {
        return None;
    }
    // D25: unknown keys are the client's choice, so their events are bounded per app.
    if reason == NoFlowReason::UnknownPlacement
        && !worker
            .shared
            .unknown_placements
            .admit(app.id(), key, std::time::Instant::now())
    {
        worker
            .shared
            .metrics
            .unknown_placement_events_suppressed(&app.id().to_string(), 1);
        return None;
    }
    let now = worker.shared.clock.now();
    resolution.no_flow_event(app, key, request, EventId::new_v7(now), now)
}

pub(super) fn enqueue_server_events(worker: &Worker, events: Vec<AnalyticsEvent>) {
    if events.is_empty() {
        return;
    }
    let count = events.len();
    // Server events are the service's own records, not events a client was told were accepted:
    // under overload they are dropped (and counted) rather than failing the resolve.
    if worker.shared.sink.try_enqueue(events).is_err() {
        worker.shared.metrics.server_events_dropped(count);
        tracing::warn!(
            count,
            "resolve_no_flow events dropped: the event buffer is full"
        );
    }
}

/// The sticky placement `key` names and where its assignments are, when a resolve of it in
/// `mode` must read them (D23); `None` for every other resolve, which [`resolve_one`] answers
/// from the snapshot alone, synchronously, at the cost it had before sticky assignment.
pub(super) fn sticky_placement<'a, 'w>(
    worker: &'w Worker,
    app: &'a App,
    key: &str,
    mode: ResolveMode,
) -> Option<(&'a Placement, &'w Rc<WorkerReads>)> {
    match (&worker.sticky, mode) {
        (Some(sticky), ResolveMode::Normal) => app
            .placement(key)
            .filter(|p| p.is_sticky())
            .map(|p| (p, sticky)),
        _ => None,
    }
}

/// Resolves one placement for a parsed body and renders the result (single and legacy
/// routes), from the snapshot alone (see [`sticky_placement`]).
pub(super) fn resolve_one(
    worker: &Worker,
    app: &App,
    key: &str,
    body: ResolveBody<'_>,
    mode: ResolveMode,
) -> Result<Reply> {
    with_request(body, |request| {
        let resolution = app.resolve(key, request, mode);
        render_one(worker, app, key, request, &resolution, mode)
    })
}

/// The request of a resolve body, or the 400 of its identity fields.
fn with_request<T>(
    mut body: ResolveBody<'_>,
    then: impl FnOnce(&ResolveRequest<'_>) -> T,
) -> Result<T> {
    let mut errors = Vec::new();
    let id = identity(&mut body, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    Ok(then(&id.request()))
}

/// A placement with a sticky experiment: the user's stored assignments read first, the new
/// ones queued behind the response (D23).
pub(super) async fn resolve_one_sticky(
    worker: &Worker,
    app: &App,
    placement: &Placement,
    sticky: &Rc<WorkerReads>,
    mut body: ResolveBody<'_>,
) -> Result<Reply> {
    let mut errors = Vec::new();
    let id = identity(&mut body, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let request = id.request();
    let mut state = sticky.read(app.id(), placement.sticky_ids(&request)).await;
    let resolution = placement.resolve_sticky(app, &request, ResolveMode::Normal, &mut state);
    sticky.write_behind(app.id(), &state);
    Ok(render_one(
        worker,
        app,
        placement.key(),
        &request,
        &resolution,
        ResolveMode::Normal,
    ))
}

/// The body of one resolve's result, and its `resolve_no_flow` event (D8), enqueued best effort.
fn render_one(
    worker: &Worker,
    app: &App,
    key: &str,
    request: &ResolveRequest<'_>,
    resolution: &Resolution<'_>,
    mode: ResolveMode,
) -> Reply {
    let mut body = BodyWriter::with_capacity(512);
    write_result(
        &mut body,
        app,
        resolution,
        worker.shared.config.default_cache_ttl_seconds,
        None,
        None,
    );
    // D3.5: export never records events.
    if mode == ResolveMode::Normal {
        // `vec!` of one allocates one event: a growing vector's first allocation holds four,
        // larger than the allocator's per-thread cache serves (P26).
        if let Some(event) = no_flow_event(worker, app, key, request, resolution) {
            enqueue_server_events(worker, vec![event]);
        }
    }
    Reply::Resolved(body)
}

pub(super) async fn resolve_body<'b>(
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
    buf: &'b mut Vec<u8>,
) -> Result<ResolveBody<'b>> {
    *buf = body::read_document(
        req,
        payload,
        worker.shared.config.resolve_body_limit,
        Encoding::IdentityOnly,
        &worker.shared.config.body_pace,
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
    worker: &Worker,
    app_id: &str,
    key: &str,
) -> Reply {
    let result = async {
        let caller = guard::authenticate(req, worker)?;
        let app_id = guard::app_id_param(app_id)?;
        let key = guard::placement_param(key)?;
        let app = guard::app(&caller, app_id)?;
        let mode = export_mode(req)?;
        let mut buf = Vec::new();
        let body = resolve_body(req, payload, worker, &mut buf).await?;
        match sticky_placement(worker, app, key, mode) {
            // Boxed: the read's state is not part of every resolve's.
            Some((placement, sticky)) => {
                Box::pin(resolve_one_sticky(worker, app, placement, sticky, body)).await
            }
            None => resolve_one(worker, app, key, body, mode),
        }
    }
    .await;
    or_problem(req, result)
}

/// `POST /v1/apps/{appId}/placements/resolve-batch`, with the path's raw `appId`.
pub async fn resolve_batch(
    req: &HttpRequest,
    payload: Payload,
    worker: &Worker,
    coding: ContentEncoding,
    app_id: &str,
) -> Reply {
    let result = async {
        let caller = guard::authenticate(req, worker)?;
        let app_id = guard::app_id_param(app_id)?;
        let app = guard::app(&caller, app_id)?;
        let mut buf = Vec::new();
        let mut body = resolve_body(req, payload, worker, &mut buf).await?;
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
        let sticky_ids = match &worker.sticky {
            Some(_) => app.sticky_ids(keys.iter().copied(), &request),
            None => Vec::new(),
        };
        let resolutions: Vec<_> = match (&worker.sticky, sticky_ids.is_empty()) {
            (Some(sticky), false) => {
                let mut state = sticky.read(app.id(), sticky_ids).await;
                let resolutions = keys
                    .iter()
                    .map(|key| {
                        let r = app.resolve_sticky(key, &request, ResolveMode::Normal, &mut state);
                        (key, r)
                    })
                    .collect();
                sticky.write_behind(app.id(), &state);
                resolutions
            }
            _ => keys
                .iter()
                .map(|key| (key, app.resolve(key, &request, ResolveMode::Normal)))
                .collect(),
        };
        let mut body = compression::batch_body(coding, || {
            resolutions
                .iter()
                .map(|(_, r)| {
                    r.version().map_or(256, |v| {
                        v.flow_schema().get().len() + v.fonts_json().get().len() + 512
                    })
                })
                .sum::<usize>()
                + 64
        });
        body.buf().extend_from_slice(b"{\"results\":[");
        let mut events = Vec::new();
        for (i, (key, resolution)) in resolutions.iter().enumerate() {
            if i > 0 {
                body.buf().push(b',');
            }
            let error = resolution
                .no_flow_reason()
                .filter(|r| *r == NoFlowReason::FlowUnpublished)
                .map(|r| r.as_str());
            write_result(
                &mut body,
                app,
                resolution,
                worker.shared.config.default_cache_ttl_seconds,
                Some(key),
                error,
            );
            events.extend(no_flow_event(worker, app, key, &request, resolution));
        }
        body.buf().extend_from_slice(b"]}");
        enqueue_server_events(worker, events);
        Ok(Reply::Resolved(body))
    }
    .await;
    or_problem(req, result)
}
