//! Response bodies of resolve and batch resolve (D3.7, D3.8, D6). The published version's
//! `flow_schema` and `fonts` were serialised once when the snapshot was built; a response is
//! written as small owned pieces around the snapshot's own bytes, which are sent without being
//! copied ([`Spliced`]), so the cost of a response does not depend on the size of the flow.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use actix_web::web::Bytes;
use flowgate_domain::catalog::{App, PublishedVersion};
use flowgate_domain::Resolution;
use serde::Serialize;

/// Shared parts shorter than this are copied: a separate chunk costs more than the copy.
const SPLICE_MIN: usize = 1024;

/// A response body under construction: owned bytes written in place, with shared parts of the
/// snapshot spliced in between them as reference-counted chunks.
///
/// Sharing saves copying a flow into the body, but actix writes a body of several chunks to
/// the socket about every 32 KiB, while a single chunk goes out in one write: a response with
/// one flow (resolve) shares it; a response with many (batch) is written contiguously
/// ([`Spliced::contiguous`]), which measured faster for batches of 10.
#[derive(Debug, Default)]
pub struct Spliced {
    parts: Vec<Bytes>,
    buf: Vec<u8>,
    len: usize,
    share: bool,
}

/// A published version's `flow_schema` bytes, kept alive by the version's `Arc`.
struct FlowSchema(Arc<PublishedVersion>);

impl AsRef<[u8]> for FlowSchema {
    fn as_ref(&self) -> &[u8] {
        self.0.flow_schema.get().as_bytes()
    }
}

impl Spliced {
    /// An empty body that sends large flows as shared chunks; its owned pieces start with
    /// room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            parts: Vec::new(),
            buf: Vec::with_capacity(capacity),
            len: 0,
            share: true,
        }
    }

    /// An empty body written as one contiguous chunk (flows are copied into it).
    pub fn contiguous(capacity: usize) -> Self {
        Self {
            share: false,
            ..Self::with_capacity(capacity)
        }
    }

    /// The owned bytes being written.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Appends a version's `flow_schema`: as a chunk that shares the snapshot's bytes when
    /// large, copied when small.
    fn splice_schema(&mut self, version: &Arc<PublishedVersion>) {
        let schema = version.flow_schema.get().as_bytes();
        if !self.share || schema.len() < SPLICE_MIN {
            self.buf.extend_from_slice(schema);
            return;
        }
        let shared = Bytes::from_owner(FlowSchema(Arc::clone(version)));
        self.flush();
        self.len += shared.len();
        self.parts.push(shared);
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            let capacity = self.buf.capacity().clamp(64, 1024);
            let done = std::mem::replace(&mut self.buf, Vec::with_capacity(capacity));
            self.len += done.len();
            self.parts.push(Bytes::from(done));
        }
    }

    /// The finished body.
    pub fn finish(mut self) -> SplicedBody {
        self.flush();
        SplicedBody {
            parts: self.parts.into_iter(),
            len: self.len as u64,
        }
    }
}

/// A body of chunks with a known total length (sent with `Content-Length`).
#[derive(Debug)]
pub struct SplicedBody {
    parts: std::vec::IntoIter<Bytes>,
    len: u64,
}

impl MessageBody for SplicedBody {
    type Error = Infallible;

    fn size(&self) -> BodySize {
        BodySize::Sized(self.len)
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Poll::Ready(self.parts.next().map(Ok))
    }

    fn try_into_bytes(mut self) -> Result<Bytes, Self> {
        match self.parts.len() {
            0 => Ok(Bytes::new()),
            1 => Ok(self.parts.next().unwrap_or_default()),
            _ => Err(self),
        }
    }
}

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
    out: &mut Spliced,
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
            uuid(buf, "flow_id", version.flow_id.as_uuid());
            uuid(buf, "flow_version_id", version.id.as_uuid());
            number(buf, "flow_version", version.version);
            number(buf, "schema_version", version.schema_version);
            field(buf, "flow_schema");
            out.splice_schema(version);
            let buf = out.buf();
            string(buf, "media_base_url", &app.media_base_url);
            string(buf, "icon_base_url", &app.icon_base_url);
            field(buf, "fonts");
            buf.extend_from_slice(version.fonts_json.get().as_bytes());
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
        app.cache_ttl_seconds.unwrap_or(default_ttl),
    );
    if resolution.version().is_some() {
        // D3.7: the contract's renderer compatibility field, always "web"; omitted on no flow.
        string(buf, "renderer_mode", "web");
    }
    if let Some(a) = resolution.assignment() {
        uuid(buf, "experiment_id", a.experiment.id.as_uuid());
        uuid(buf, "variant_id", a.variant.id.as_uuid());
        string(buf, "variant_name", &a.variant.name);
    }
    if let Some(code) = error {
        string(buf, "error", code);
    }
    buf.push(b'}');
}
