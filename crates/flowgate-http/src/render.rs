//! Response bodies of resolve and batch resolve (D3.7, D3.8, D6), written straight into a byte
//! buffer. The published version's `flow_schema` and `fonts` were serialised once when the
//! snapshot was built; here they are spliced in as bytes, so the cost of a response does not
//! depend on the size of the flow.

use flowgate_domain::catalog::App;
use flowgate_domain::Resolution;
use serde::Serialize;

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

fn display(buf: &mut Vec<u8>, name: &str, value: impl std::fmt::Display) {
    field(buf, name);
    buf.push(b'"');
    buf.extend_from_slice(value.to_string().as_bytes());
    buf.push(b'"');
}

fn number(buf: &mut Vec<u8>, name: &str, value: impl Serialize) {
    field(buf, name);
    let _ = serde_json::to_writer(&mut *buf, &value);
}

/// Appends one resolve result object. `placement_key` and `error` are the batch entry's extra
/// members (D6).
pub fn write_result(
    buf: &mut Vec<u8>,
    app: &App,
    resolution: &Resolution<'_>,
    default_ttl: u32,
    placement_key: Option<&str>,
    error: Option<&str>,
) {
    buf.push(b'{');
    if let Some(key) = placement_key {
        string(buf, "placement_key", key);
    }
    match resolution {
        Resolution::Flow { version, .. } => {
            display(buf, "flow_id", version.flow_id);
            display(buf, "flow_version_id", version.id);
            number(buf, "flow_version", version.version);
            number(buf, "schema_version", version.schema_version);
            field(buf, "flow_schema");
            buf.extend_from_slice(version.flow_schema.get().as_bytes());
            string(buf, "media_base_url", &app.media_base_url);
            string(buf, "icon_base_url", &app.icon_base_url);
            field(buf, "fonts");
            buf.extend_from_slice(version.fonts_json.get().as_bytes());
        }
        Resolution::NoFlow { .. } => {
            field(buf, "flow_id");
            buf.extend_from_slice(b"null");
        }
    }
    number(
        buf,
        "cache_ttl_seconds",
        app.cache_ttl_seconds.unwrap_or(default_ttl),
    );
    if resolution.version().is_some() {
        // D3.7: the contract's renderer compatibility field, always "web"; omitted on no flow.
        string(buf, "renderer_mode", "web");
    }
    if let Some(a) = resolution.assignment() {
        display(buf, "experiment_id", a.experiment.id);
        display(buf, "variant_id", a.variant.id);
        string(buf, "variant_name", &a.variant.name);
    }
    if let Some(code) = error {
        string(buf, "error", code);
    }
    buf.push(b'}');
}
