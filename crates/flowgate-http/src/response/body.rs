//! Response bodies built from owned bytes and the snapshot's shared flow bytes.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use actix_web::web::Bytes;
use flowgate_domain::catalog::PublishedVersion;

use super::flow_cache::CompressedFlows;
use super::gzip::GzipMember;
/// Shared parts shorter than this are copied: a separate chunk costs more than the copy.
const SPLICE_MIN: usize = 1024;

/// A response body under construction: owned bytes written in place, with shared parts of the
/// snapshot spliced in between them as reference-counted chunks.
///
/// Sharing saves copying a flow into the body, but actix writes a body of several chunks to
/// the socket about every 32 KiB, while a single chunk goes out in one write: a response with
/// one flow (resolve) shares it; a response with many (batch) is written contiguously
/// ([`BodyWriter::contiguous`]) (fewer socket writes).
#[derive(Debug, Default)]
pub struct BodyWriter {
    parts: Vec<Part>,
    buf: Vec<u8>,
    len: usize,
    share: bool,
}

/// A piece of a body: bytes written for this response, or a version's shared `flow_schema`.
#[derive(Debug)]
enum Part {
    Owned(Bytes),
    Flow(Arc<PublishedVersion>),
}

impl Part {
    fn len(&self) -> usize {
        match self {
            Part::Owned(bytes) => bytes.len(),
            Part::Flow(version) => version.flow_schema().get().len(),
        }
    }

    /// The bytes to send: a flow's schema is shared, not copied.
    fn into_bytes(self) -> Bytes {
        match self {
            Part::Owned(bytes) => bytes,
            Part::Flow(version) => Bytes::from_owner(FlowSchema(version)),
        }
    }
}

/// A published version's `flow_schema` bytes, kept alive by the version's `Arc`.
struct FlowSchema(Arc<PublishedVersion>);

impl AsRef<[u8]> for FlowSchema {
    fn as_ref(&self) -> &[u8] {
        self.0.flow_schema().get().as_bytes()
    }
}

impl BodyWriter {
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
    pub(crate) fn append_flow(&mut self, version: &Arc<PublishedVersion>) {
        let schema = version.flow_schema().get().as_bytes();
        if !self.share || schema.len() < SPLICE_MIN {
            self.buf.extend_from_slice(schema);
            return;
        }
        self.flush();
        self.len += schema.len();
        self.parts.push(Part::Flow(Arc::clone(version)));
    }

    /// Moves the owned bytes written so far into `parts`, with a new buffer for what follows.
    fn flush(&mut self) {
        if !self.buf.is_empty() {
            let capacity = self.buf.capacity().clamp(64, 1024);
            let done = std::mem::replace(&mut self.buf, Vec::with_capacity(capacity));
            self.push_owned(done);
        }
    }

    /// The last flush: nothing follows, so no new buffer.
    fn flush_last(&mut self) {
        if !self.buf.is_empty() {
            let done = std::mem::take(&mut self.buf);
            self.push_owned(done);
        }
    }

    fn push_owned(&mut self, done: Vec<u8>) {
        self.len += done.len();
        self.parts.push(Part::Owned(Bytes::from(done)));
    }

    /// The finished body.
    pub fn finish(mut self) -> ChunkedBody {
        self.flush_last();
        ChunkedBody {
            parts: self.parts.into_iter(),
            len: self.len as u64,
        }
    }

    /// The finished body as one gzip member, when it holds a shared flow: the flow goes out
    /// compressed once per version ([`CompressedFlows`]), the bytes written for this response as stored
    /// (uncompressed) deflate blocks around it, so no compressor runs per request. A version
    /// that appears again within a deflate window (32 KiB) of its previous copy (adjacent
    /// placements of a batch that show the same flow) goes out as a copy of that copy
    /// (a few hundred bytes), as a stream compressor would send it.
    ///
    /// `Err` (the caller compresses the whole body then) when that would send many more bytes
    /// than compressing the body as one stream: when it has no shared flow, or when the bytes
    /// written for the response (JSON around the flows, small flows, fonts) are more than a
    /// quarter of the body, as they would go out uncompressed.
    pub fn finish_gzip(mut self, flows: &CompressedFlows) -> Result<ChunkedBody, Self> {
        self.flush_last();
        let shared: usize = self
            .parts
            .iter()
            .filter(|p| matches!(p, Part::Flow(..)))
            .map(Part::len)
            .sum();
        if shared == 0 || (self.len - shared) * 4 > self.len {
            return Err(self);
        }
        let mut member = GzipMember::new(self.parts.len());
        for part in self.parts {
            match part {
                Part::Owned(bytes) => member.stored(&bytes),
                Part::Flow(version) => {
                    let len = version.flow_schema().get().len();
                    member.flow(version.id().0, len, &flows.get(&version));
                }
            }
        }
        let out: Vec<Part> = member.finish().into_iter().map(Part::Owned).collect();
        let len = out.iter().map(Part::len).sum::<usize>() as u64;
        Ok(ChunkedBody {
            parts: out.into_iter(),
            len,
        })
    }

    /// The finished body as one chunk, for a compressor: actix's encoder hands every chunk
    /// over 1 KiB to the blocking pool and flushes after each, so a body of many chunks costs
    /// a thread hand-off per chunk and compresses worse.
    pub fn finish_joined(mut self) -> Bytes {
        self.flush_last();
        if self.parts.len() == 1 {
            return self.parts.pop().map(Part::into_bytes).unwrap_or_default();
        }
        let mut out = Vec::with_capacity(self.len);
        for part in &self.parts {
            match part {
                Part::Owned(bytes) => out.extend_from_slice(bytes),
                Part::Flow(version) => {
                    out.extend_from_slice(version.flow_schema().get().as_bytes())
                }
            }
        }
        Bytes::from(out)
    }
}
/// A body of chunks with a known total length (sent with `Content-Length`).
#[derive(Debug)]
pub struct ChunkedBody {
    parts: std::vec::IntoIter<Part>,
    len: u64,
}

impl MessageBody for ChunkedBody {
    type Error = Infallible;

    fn size(&self) -> BodySize {
        BodySize::Sized(self.len)
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Poll::Ready(self.parts.next().map(|part| Ok(part.into_bytes())))
    }

    fn try_into_bytes(mut self) -> Result<Bytes, Self> {
        match self.parts.len() {
            0 => Ok(Bytes::new()),
            1 => Ok(self.parts.next().map(Part::into_bytes).unwrap_or_default()),
            _ => Err(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;
    use crate::response::test_support::{large_schema, noise, version_with_id};

    fn gunzip(body: ChunkedBody) -> Vec<u8> {
        let bytes: Vec<u8> = body.parts.flat_map(|p| p.into_bytes().to_vec()).collect();
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes.as_slice())
            .read_to_end(&mut out)
            .expect("one gzip member");
        out
    }

    /// Distinct large flows with little JSON around them are spliced; a repeated version or a
    /// body mostly of the response's own bytes is left to a whole-body compressor.
    #[test]
    fn gzip_splices_only_when_it_does_not_cost_bytes() {
        let flows = CompressedFlows::default();
        let (a, b) = (
            version_with_id(&large_schema("a"), 1),
            version_with_id(&large_schema("b"), 2),
        );
        let body = |versions: &[&Arc<PublishedVersion>], own: usize| {
            let mut body = BodyWriter::with_capacity(64);
            body.buf().extend_from_slice(&vec![b' '; own]);
            for v in versions {
                body.buf().push(b'[');
                body.append_flow(v);
                body.buf().push(b']');
            }
            body
        };
        let spliced = body(&[&a, &b], 100).finish_gzip(&flows).expect("spliced");
        let mut expected = vec![b' '; 100];
        for v in [&a, &b] {
            expected.push(b'[');
            expected.extend_from_slice(v.flow_schema().get().as_bytes());
            expected.push(b']');
        }
        assert_eq!(gunzip(spliced), expected);
        // A version repeated within the window is a copy of its previous copy; farther back
        // (where a stream compressor cannot refer either) it is sent compressed again.
        let others: Vec<_> = (3..20)
            .map(|id| version_with_id(&large_schema(&id.to_string()), id))
            .collect();
        let mut far = vec![&a, &a];
        far.extend(others.iter());
        far.extend([&a, &b, &a]);
        let expected = body(&far, 100).finish_joined();
        assert!(expected.len() > 40 * 1024);
        let spliced = body(&far, 100).finish_gzip(&flows).expect("spliced");
        let deflated = |v: &Arc<PublishedVersion>| flows.get(v).data.len();
        assert!(deflated(&a) > 1500, "{} bytes", deflated(&a));
        let once: usize = [&a, &b].into_iter().chain(&others).map(deflated).sum();
        // a, its copy, the others, a again (beyond the window), b, a copy of a.
        let sent = spliced.len as usize;
        assert!(
            sent > once + deflated(&a) + 100 && sent < once + deflated(&a) + 500,
            "{sent} bytes for {once} + {} of compressed flows: each copy costs a few bytes",
            deflated(&a)
        );
        assert_eq!(gunzip(spliced), expected.to_vec());
        let own = a.flow_schema().get().len() * 2;
        assert!(
            body(&[&a, &b], own).finish_gzip(&flows).is_err(),
            "mostly own bytes"
        );
        assert!(body(&[], 100).finish_gzip(&flows).is_err(), "no flow");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Whatever the order and sizes of flows and of the JSON around them (repeats near and
        /// far, flows longer than the window), a spliced gzip body decodes to the body itself.
        #[test]
        fn any_spliced_gzip_body_decodes_to_the_body(
            sizes in proptest::collection::vec(1024usize..40_000, 1..5),
            layout in proptest::collection::vec((0usize..5, 0usize..600), 1..24),
        ) {
            let flows = CompressedFlows::default();
            let versions: Vec<_> = sizes
                .iter()
                .enumerate()
                .map(|(i, &size)| {
                    let text = noise(&i.to_string(), size);
                    version_with_id(&format!("{{\"t\":\"{text}\"}}"), i as u128 + 1)
                })
                .collect();
            let build = || {
                let mut body = BodyWriter::with_capacity(64);
                for &(flow, own) in &layout {
                    body.buf().extend(std::iter::repeat_n(b'x', own));
                    body.append_flow(&versions[flow % versions.len()]);
                }
                body
            };
            let expected = build().finish_joined();
            match build().finish_gzip(&flows) {
                Ok(spliced) => proptest::prop_assert_eq!(gunzip(spliced), expected.to_vec()),
                Err(body) => {
                    // Only a body mostly of its own bytes is left to the compressor.
                    let own: usize = layout.iter().map(|&(_, own)| own).sum();
                    proptest::prop_assert!(own * 4 > expected.len());
                    proptest::prop_assert_eq!(body.finish_joined(), expected);
                }
            }
        }
    }

    /// A body joined for a compressor holds the same bytes as the chunks it would have sent.
    #[test]
    fn joined_body_is_the_chunks_concatenated() {
        let (a, b) = (
            version_with_id(&large_schema("a"), 1),
            version_with_id(&large_schema("b"), 2),
        );
        let build = || {
            let mut body = BodyWriter::with_capacity(16);
            body.buf().extend_from_slice(b"{\"a\":");
            body.append_flow(&a);
            body.buf().extend_from_slice(b",\"b\":");
            body.append_flow(&b);
            body.buf().push(b'}');
            body
        };
        let chunks: Vec<u8> = build()
            .finish()
            .parts
            .flat_map(|p| p.into_bytes().to_vec())
            .collect();
        let joined = build().finish_joined();
        assert_eq!(joined.as_ref(), chunks.as_slice());
        assert!(joined.starts_with(b"{\"a\":{\"tag\":\"a\""));
        assert!(serde_json::from_slice::<serde_json::Value>(&joined).is_ok());
    }
}
