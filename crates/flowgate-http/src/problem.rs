//! RFC 9457 problem details with stable codes (D9): every non-2xx response of this service.
//! A 5xx never carries internals; the detail for operators goes to the log with the request id.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use serde::Serialize;

/// The media type of problem responses.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// One invalid field of a request (D9 `errors`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// The field, e.g. `user_id` or `placement_keys[3]`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// A field error.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Every problem code this service answers with (D9), with its status and title. The OpenAPI
/// document lists the same table.
pub const PROBLEM_CODES: &[(&str, u16, &str)] = &[
    ("invalid_request", 400, "Invalid request"),
    ("validation_failed", 400, "Validation failed"),
    ("too_many_events", 400, "Too many events"),
    ("too_many_placements", 400, "Too many placements"),
    ("invalid_notification", 400, "Invalid store notification"),
    ("store_mismatch", 400, "Store notification for another app"),
    ("missing_api_key", 401, "Missing API key"),
    ("invalid_api_key", 401, "Invalid API key"),
    ("key_type_not_allowed", 401, "Key type not allowed"),
    ("key_environment_mismatch", 401, "Key environment mismatch"),
    ("invalid_signature", 401, "Invalid signature"),
    ("forbidden_app", 403, "Forbidden app"),
    ("app_not_found", 404, "App not found"),
    ("not_found", 404, "Not found"),
    ("method_not_allowed", 405, "Method not allowed"),
    ("request_timeout", 408, "Request timeout"),
    ("store_not_configured", 409, "Store not configured"),
    ("payload_too_large", 413, "Payload too large"),
    ("unsupported_media_type", 415, "Unsupported media type"),
    ("rate_limited", 429, "Rate limited"),
    ("internal", 500, "Internal error"),
    ("overloaded", 503, "Overloaded"),
];

/// An error answered as problem+json.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// Stable code (D9).
    pub code: &'static str,
    /// HTTP status.
    pub status: StatusCode,
    /// Human explanation for this occurrence; never internals.
    pub detail: String,
    /// Invalid fields, for `validation_failed`.
    pub errors: Vec<FieldError>,
    /// `Retry-After` seconds (429, 503).
    pub retry_after: Option<u32>,
    /// `Allow` header (405).
    pub allow: Option<&'static str>,
    /// Close the connection after this response (`Connection: close`): the request's body was
    /// not read to its end, or the connection must not serve another request (D25).
    pub close: bool,
}

impl ApiError {
    fn new(code: &'static str, detail: impl Into<String>) -> Self {
        let status = PROBLEM_CODES
            .iter()
            .find(|(c, _, _)| *c == code)
            .and_then(|(_, s, _)| StatusCode::from_u16(*s).ok())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self {
            code,
            status,
            detail: detail.into(),
            errors: Vec::new(),
            retry_after: None,
            allow: None,
            close: false,
        }
    }

    /// 400 `invalid_request`: malformed JSON, bad path or query parameter, wrong body shape.
    pub fn invalid_request(detail: impl Into<String>) -> Self {
        Self::new("invalid_request", detail)
    }

    /// 400 `validation_failed` with the invalid fields.
    pub fn validation(errors: Vec<FieldError>) -> Self {
        let detail = match errors.as_slice() {
            [one] => format!("{}: {}", one.field, one.message),
            many => format!("{} fields are invalid", many.len()),
        };
        Self {
            errors,
            ..Self::new("validation_failed", detail)
        }
    }

    /// 400 `too_many_events` (D7).
    pub fn too_many_events(count: usize, max: usize) -> Self {
        Self::new(
            "too_many_events",
            format!("{count} events in one request; at most {max} are allowed"),
        )
    }

    /// 400 `too_many_placements` (D6).
    pub fn too_many_placements(distinct: usize) -> Self {
        Self::new(
            "too_many_placements",
            format!("{distinct} distinct placement keys; at most 50 are allowed"),
        )
    }

    /// 401 with one of the authentication codes (D1).
    pub fn unauthorized(error: flowgate_domain::keys::AuthError) -> Self {
        let detail = match error {
            flowgate_domain::keys::AuthError::MissingApiKey => {
                "send the SDK key as `Authorization: Bearer <key>`".to_owned()
            }
            other => other.to_string(),
        };
        Self::new(error.code(), detail)
    }

    /// 401 `invalid_api_key` for a request with more than one `Authorization` header (D25).
    pub fn several_authorization_headers() -> Self {
        Self::new(
            "invalid_api_key",
            "the request has more than one Authorization header; send the SDK key in one",
        )
    }

    /// 400 `invalid_notification` (D30): a store notification's body or fields cannot be read.
    pub fn invalid_notification(detail: impl Into<String>) -> Self {
        Self::new("invalid_notification", detail)
    }

    /// 400 `store_mismatch` (D30): a notification of another bundle or environment than the
    /// app's.
    pub fn store_mismatch(detail: impl Into<String>) -> Self {
        Self::new("store_mismatch", detail)
    }

    /// 409 `store_not_configured` (D30): the app is in the catalog but takes no App Store
    /// notifications (it has no `apple_bundle_id`). A conflict with the app's state rather
    /// than a fault of the request (400) or of its content (422): the same notification is
    /// taken once the catalog gives the app its bundle id. An app not in the catalog is 404
    /// `app_not_found`, as on every app route.
    pub fn store_not_configured(app: flowgate_domain::ids::AppId) -> Self {
        Self::new(
            "store_not_configured",
            format!("app {app} has no apple_bundle_id in the catalog: it takes no App Store notifications"),
        )
    }

    /// 401 `invalid_signature` (D30): an App Store signature that does not verify; the detail
    /// says which check failed.
    pub fn invalid_signature(detail: impl Into<String>) -> Self {
        Self::new("invalid_signature", detail)
    }

    /// 403 `forbidden_app`.
    pub fn forbidden_app() -> Self {
        Self::new(
            "forbidden_app",
            "the app does not belong to this key's workspace",
        )
    }

    /// 404 `app_not_found`.
    pub fn app_not_found() -> Self {
        Self::new("app_not_found", "no app with this id")
    }

    /// 404 `not_found` for an unknown route.
    pub fn not_found() -> Self {
        Self::new("not_found", "no such route")
    }

    /// 405 `method_not_allowed`.
    pub fn method_not_allowed(allow: &'static str) -> Self {
        Self {
            allow: Some(allow),
            ..Self::new(
                "method_not_allowed",
                format!("this route accepts {allow} only"),
            )
        }
    }

    /// 408 `request_timeout` (D25): the body did not arrive within `server.body_timeout_ms`, or
    /// arrived slower than `server.body_min_bytes_per_sec`. The connection is closed.
    pub fn request_timeout(detail: impl Into<String>) -> Self {
        Self {
            close: true,
            ..Self::new("request_timeout", detail)
        }
    }

    /// 400 `invalid_request` for a request that arrived on a connection an earlier response
    /// closed (`Connection: close`): it is not processed, and the connection closes (D25).
    pub fn after_close() -> Self {
        Self {
            close: true,
            ..Self::invalid_request(
                "an earlier response on this connection said `Connection: close`; this \
                 request was not processed: send it on a new connection",
            )
        }
    }

    /// 413 `payload_too_large`.
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            "payload_too_large",
            format!("the body is larger than {limit} bytes"),
        )
    }

    /// 415 `unsupported_media_type`.
    pub fn unsupported_media_type(detail: impl Into<String>) -> Self {
        Self::new("unsupported_media_type", detail)
    }

    /// 429 `rate_limited`.
    pub fn rate_limited(retry_after: u32) -> Self {
        Self {
            retry_after: Some(retry_after),
            ..Self::new("rate_limited", "too many requests; retry later")
        }
    }

    /// 503 `overloaded` (D7): nothing of the request was accepted.
    pub fn overloaded(retry_after: u32) -> Self {
        Self {
            retry_after: Some(retry_after),
            ..Self::new(
                "overloaded",
                "the service cannot take these events now; none were accepted, retry later",
            )
        }
    }

    /// 500 `internal`; the cause is logged by the caller, never sent.
    pub fn internal() -> Self {
        Self::new(
            "internal",
            "an internal error occurred; quote the request id when reporting it",
        )
    }

    /// The problem response for request `request_id`.
    pub fn to_response(&self, request_id: &str) -> HttpResponse {
        let title = PROBLEM_CODES
            .iter()
            .find(|(c, _, _)| *c == self.code)
            .map_or("Error", |(_, _, t)| *t);
        let errors = FieldErrors {
            errors: (!self.errors.is_empty()).then_some(&self.errors),
        };
        let body = problem_body(
            self.status,
            self.code,
            title,
            &self.detail,
            request_id,
            errors,
        );
        let mut response = problem_builder(self.status);
        if let Some(secs) = self.retry_after {
            response.insert_header((header::RETRY_AFTER, secs.to_string()));
        }
        if let Some(allow) = self.allow {
            response.insert_header((header::ALLOW, allow));
        }
        if self.close {
            response.force_close();
        }
        response.body(body)
    }
}

/// A problem+json response of `status` (D9) without its body: the content type set, for
/// headers of its own before [`problem_body`]. Every listener answers problems through these
/// two: `/v1` ([`ApiError`]), the admin API and its readiness.
pub(crate) fn problem_builder(status: StatusCode) -> actix_web::HttpResponseBuilder {
    let mut response = HttpResponse::build(status);
    response.insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)));
    response
}

/// The problem+json body (D9): `type` (from `code`), `title`, `status`, `detail`, `code`,
/// `request_id`, then the members of `extra` (a `/v1` validation's `errors`, readiness's
/// `checks`; [`NoExtra`] for none).
pub(crate) fn problem_body<E: Serialize>(
    status: StatusCode,
    code: &str,
    title: &str,
    detail: &str,
    request_id: &str,
    extra: E,
) -> Vec<u8> {
    let body = ProblemBody {
        r#type: format!("https://flowgate.dev/problems/{code}"),
        title,
        status: status.as_u16(),
        detail,
        code,
        request_id,
        extra,
    };
    // Strings, numbers and the extra members' plain data: serialising cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// No member beside the standard ones.
#[derive(Serialize)]
pub(crate) struct NoExtra {}

#[derive(Serialize)]
struct ProblemBody<'a, E> {
    r#type: String,
    title: &'a str,
    status: u16,
    detail: &'a str,
    code: &'a str,
    request_id: &'a str,
    #[serde(flatten)]
    extra: E,
}

/// A validation problem's per-field errors, when it has any.
#[derive(Serialize)]
struct FieldErrors<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a Vec<FieldError>>,
}

/// `value` quoted for a problem's detail, cut to 64 characters.
pub(crate) fn quoted(value: &str) -> String {
    let mut cut: String = value.chars().take(64).collect();
    if cut.len() < value.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_status_and_is_snake_case() {
        for (code, status, title) in PROBLEM_CODES {
            assert!(
                code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{code}"
            );
            assert!(StatusCode::from_u16(*status).is_ok());
            assert!(!title.is_empty());
            assert_eq!(ApiError::new(code, "x").status.as_u16(), *status, "{code}");
        }
    }
}
