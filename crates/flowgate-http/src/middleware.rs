//! What every response passes through: request id, per-request log line and metrics (both
//! listeners), and on `/v1` the `RateLimit-*` headers (D10) and CORS for browser SDKs (D11).
//! Compression is `response::compression`'s. The API's dispatcher (`dispatch::serve`) calls these functions inline;
//! the admin listener runs them as the [`observe`] middleware.

use std::sync::OnceLock;
use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{web, Error, HttpMessage, HttpRequest, HttpResponse};

use crate::guard::RateLimitInfo;
use crate::log_sampler::CLIENT_ERROR_LINES_PER_SECOND;
use crate::metrics::{HttpMetrics, LatencyRecorder};
use crate::request_body::BodyAbort;
use crate::request_id::{self, RequestId};

/// The route pattern of an admin resource, for metrics and logs: set as the resource's app
/// data, so the middleware reads it after the call instead of matching the path again.
#[derive(Clone, Copy, Debug)]
pub struct Route(pub &'static str);

/// Request id, then one log line and one metrics observation per request (the admin
/// listener; the API's dispatcher does the same inline, `dispatch::serve`).
pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let start = Instant::now();
    let id = begin(req.request());
    let metrics = req.app_data::<web::Data<HttpMetrics>>().cloned();
    let mut res = next.call(req).await?.map_into_boxed_body();
    let route = res
        .request()
        .app_data::<Route>()
        .map_or("unmatched", |r| r.0);
    let (req, res_mut) = (res.request().clone(), res.response_mut());
    finish(
        metrics.as_ref().map(|m| Recording {
            latency: m.get_ref(),
            metrics: m.get_ref(),
        }),
        &req,
        res_mut,
        &id,
        route,
        None,
        start,
    );
    Ok(res)
}

/// The request's id (D11), kept in its extensions for problem bodies; the header value to
/// answer with (always valid: `accept_or_new` keeps only header-safe characters).
pub(crate) fn begin(req: &HttpRequest) -> HeaderValue {
    let id = request_id::accept_or_new(req.headers().get(request_id::HEADER_NAME));
    let value = id.header_value().clone();
    req.extensions_mut().insert(id);
    value
}

/// Where a request's latency is recorded: a worker's own recorder, or the shared metrics.
pub(crate) trait RecordLatency {
    fn record(&self, route: &'static str, status: u16, elapsed: std::time::Duration);
}

impl RecordLatency for LatencyRecorder {
    fn record(&self, route: &'static str, status: u16, elapsed: std::time::Duration) {
        self.observe(route, status, elapsed);
    }
}

impl RecordLatency for HttpMetrics {
    fn record(&self, route: &'static str, status: u16, elapsed: std::time::Duration) {
        self.observe_request(route, status, elapsed);
    }
}

/// Where a request is recorded: its latency, and the adapter's counters.
pub(crate) struct Recording<'a> {
    pub(crate) latency: &'a dyn RecordLatency,
    pub(crate) metrics: &'a HttpMetrics,
}

/// Answers with the request id, then records the request: one metrics observation and one log
/// line (no key, no user id, no body).
///
/// A request whose body the client did not send in time or broke off (`BodyAbort`) is counted
/// in `requests_aborted` instead of the latency histograms: its time is the client's, and
/// alerts on latency must not fire on an attacker's schedule (D25).
///
/// Client errors (4xx) are logged at info only as many per second as `LogSampler` allows,
/// the rest at debug, with a summary line of how many were held back (D25): a flood of
/// refused requests cannot flood the log.
pub(crate) fn finish(
    recording: Option<Recording<'_>>,
    req: &HttpRequest,
    res: &mut HttpResponse,
    id: &HeaderValue,
    route: &'static str,
    app_id: Option<&str>,
    start: Instant,
) {
    res.headers_mut()
        .insert(request_id::HEADER_NAME, id.clone());
    let elapsed = start.elapsed();
    let status = res.status().as_u16();
    // Only a 400 or a 408 can come from a body read that was cut short.
    let aborted = if status == 400 || status == 408 {
        req.extensions().get::<BodyAbort>().copied()
    } else {
        None
    };
    let metrics = recording.as_ref().map(|r| r.metrics);
    match (aborted, recording) {
        (Some(abort), Some(r)) => r.metrics.request_aborted(route, abort.as_str()),
        (None, Some(r)) => r.latency.record(route, status, elapsed),
        (_, None) => {}
    }
    let latency_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    let request_id = id.to_str().unwrap_or("-");
    let app_id = app_id.unwrap_or("-");
    let method = req.method();
    if (400..500).contains(&status) {
        let (write, held_back) = match metrics {
            Some(m) => m.client_error_log.admit(),
            None => (true, 0),
        };
        if held_back > 0 {
            if let Some(m) = metrics {
                m.client_error_log_lines_suppressed(held_back);
            }
            tracing::info!(
                held_back,
                per_second = CLIENT_ERROR_LINES_PER_SECOND,
                "request lines of client errors held back at debug level since the last summary"
            );
        }
        if write {
            tracing::info!(request_id, %method, route, app_id, status, latency_us, "request");
        } else {
            tracing::debug!(request_id, %method, route, app_id, status, latency_us, "request");
        }
        return;
    }
    tracing::info!(request_id, %method, route, app_id, status, latency_us, "request");
}

const EXPOSED: &str = "X-Request-Id, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After, Deprecation, Link, ETag";

/// The answer to a CORS preflight on `/v1` (D11), when `req` is one.
pub(crate) fn preflight(req: &HttpRequest) -> Option<HttpResponse> {
    let headers = req.headers();
    if req.method() != Method::OPTIONS
        || !headers.contains_key(header::ORIGIN)
        || !headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        return None;
    }
    // Any origin may call /v1: SDK keys are publishable (D11).
    Some(
        HttpResponse::build(StatusCode::NO_CONTENT)
            .insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"))
            // GET: OFREP's configuration (D32); If-None-Match: its bulk evaluation's ETag.
            .insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, "GET, POST"))
            .insert_header((
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                "Authorization, Content-Type, Content-Encoding, X-Request-Id, If-None-Match",
            ))
            .insert_header((header::ACCESS_CONTROL_MAX_AGE, "86400"))
            .finish(),
    )
}

// Constants: `HeaderName::from_static` checks its name each time it runs.
const RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
const RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
const RATELIMIT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

/// The headers of every other `/v1` response: `RateLimit-*` (D10) when a limit was checked,
/// CORS (D11) when the request has an `Origin`.
pub(crate) fn v1_headers(req: &HttpRequest, res: &mut HttpResponse) {
    let info = req.extensions().get::<RateLimitInfo>().copied();
    let has_origin = req.headers().contains_key(header::ORIGIN);
    let headers = res.headers_mut();
    if let Some(RateLimitInfo(d)) = info {
        for (name, value) in [
            (RATELIMIT_LIMIT, d.limit),
            (RATELIMIT_REMAINING, d.remaining),
            (RATELIMIT_RESET, d.reset_secs),
        ] {
            headers.insert(name, number_header(value));
        }
    }
    if has_origin {
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSED),
        );
    }
}

/// Numbers below this are answered from [`number_header`]'s table: the `RateLimit-*` values of
/// the default limits (bursts of hundreds, resets of seconds) all are.
const SMALL_NUMBERS: u32 = 4096;

/// `n` as a header value. Below [`SMALL_NUMBERS`] it is a clone of a value made once over
/// `'static` text, which costs no allocation (`HeaderValue::from(u32)` allocates one per call,
/// three per response) and, unlike a clone of an allocated value, touches no reference count
/// that every worker would write.
fn number_header(n: u32) -> HeaderValue {
    // Every decimal number below the bound, one after another, and where each one ends.
    static TEXT: OnceLock<(String, Vec<usize>)> = OnceLock::new();
    static TABLE: OnceLock<Vec<HeaderValue>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let (text, ends) = TEXT.get_or_init(|| {
            let mut text = String::new();
            let ends = (0..SMALL_NUMBERS)
                .map(|i| {
                    text.push_str(&i.to_string());
                    text.len()
                })
                .collect();
            (text, ends)
        });
        let mut start = 0;
        ends.iter()
            .map(|&end| {
                let value = HeaderValue::from_static(&text[start..end]);
                start = end;
                value
            })
            .collect()
    });
    match table.get(n as usize) {
        Some(value) => value.clone(),
        None => HeaderValue::from(n),
    }
}

/// The request id of a request (empty when the middleware did not run).
pub fn request_id_of(req: &actix_web::HttpRequest) -> String {
    req.extensions()
        .get::<RequestId>()
        .map(|r| r.as_str().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_headers_are_the_numbers_in_decimal() {
        for n in [0, 1, 9, 10, 99, 100, 200, 4095, 4096, 65_536, u32::MAX] {
            assert_eq!(number_header(n), HeaderValue::from(n), "{n}");
        }
    }
}
