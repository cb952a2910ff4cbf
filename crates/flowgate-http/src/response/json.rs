//! The JSON of resolve results (D3.7, D3.8, D6), written straight into the response body: the
//! published version's `flow_schema` and `fonts` were serialised once when the snapshot was
//! built and are spliced in as they are.

use actix_web::body::MessageBody;
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use flowgate_domain::catalog::App;
use flowgate_domain::Resolution;
use serde::Serialize;

use super::body::BodyWriter;

fn field(buf: &mut Vec<u8>, name: &str) {
    if buf.last() != Some(&b'{') {
        buf.push(b',');
    }
    buf.push(b'"');
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b"\":");
}

fn string(buf: &mut Vec<u8>, name: &str, value: &str) {
    field(buf, name);
    // Serialising a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *buf, value);
}

fn uuid(buf: &mut Vec<u8>, name: &str, value: &uuid::Uuid) {
    field(buf, name);
    buf.push(b'"');
    // Written in place: no intermediate `String` per id.
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    buf.extend_from_slice(value.hyphenated().encode_lower(&mut text).as_bytes());
    buf.push(b'"');
}

fn number(buf: &mut Vec<u8>, name: &str, value: impl Serialize) {
    field(buf, name);
    let _ = serde_json::to_writer(&mut *buf, &value);
}

/// Appends one resolve result object. `placement_key` and `error` are the batch entry's extra
/// members (D6).
pub fn write_result(
    out: &mut BodyWriter,
    app: &App,
    resolution: &Resolution<'_>,
    default_ttl: u32,
    placement_key: Option<&str>,
    error: Option<&str>,
) {
    let buf = out.buf();
    buf.push(b'{');
    if let Some(key) = placement_key {
        string(buf, "placement_key", key);
    }
    match resolution {
        Resolution::Flow { version, .. } => {
            uuid(buf, "flow_id", version.flow_id().as_uuid());
            uuid(buf, "flow_version_id", version.id().as_uuid());
            number(buf, "flow_version", version.version());
            number(buf, "schema_version", version.schema_version());
            field(buf, "flow_schema");
            out.append_flow(version);
            let buf = out.buf();
            string(buf, "media_base_url", app.media_base_url());
            string(buf, "icon_base_url", app.icon_base_url());
            field(buf, "fonts");
            buf.extend_from_slice(version.fonts_json().get().as_bytes());
        }
        Resolution::NoFlow { .. } => {
            let buf = out.buf();
            field(buf, "flow_id");
            buf.extend_from_slice(b"null");
        }
    }
    let buf = out.buf();
    number(
        buf,
        "cache_ttl_seconds",
        app.cache_ttl_seconds().unwrap_or(default_ttl),
    );
    if resolution.version().is_some() {
        // D3.7: the renderer compatibility field, always "web"; omitted on no flow.
        string(buf, "renderer_mode", "web");
    }
    if let Some(a) = resolution.assignment() {
        uuid(buf, "experiment_id", a.experiment.id().as_uuid());
        uuid(buf, "variant_id", a.variant.id().as_uuid());
        string(buf, "variant_name", a.variant.name());
    }
    if let Some(code) = error {
        string(buf, "error", code);
    }
    buf.push(b'}');
}

/// A response with an `application/json` body.
pub(crate) fn json_response(status: StatusCode, body: impl MessageBody + 'static) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        ))
        .body(body)
}
