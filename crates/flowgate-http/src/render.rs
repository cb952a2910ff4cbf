//! Response bodies of resolve and batch resolve (D3.7, D3.8, D6). The published version's
//! `flow_schema` and `fonts` were serialised once when the snapshot was built; a response is
//! written as small owned pieces around the snapshot's own bytes, which are sent without being
//! copied ([`Spliced`]), so the cost of a response does not depend on the size of the flow.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use actix_web::web::Bytes;
use flowgate_domain::catalog::{App, PublishedVersion};
use flowgate_domain::ids::FlowVersionId;
use flowgate_domain::Catalog;
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
            Part::Flow(version) => version.flow_schema.get().len(),
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
    pub fn finish(mut self) -> SplicedBody {
        self.flush_last();
        SplicedBody {
            parts: self.parts.into_iter(),
            len: self.len as u64,
        }
    }

    /// The finished body as one gzip member, when it holds a shared flow: the flow goes out
    /// compressed once per version (`flows`), the bytes written for this response as stored
    /// (uncompressed) deflate blocks around it, so no compressor runs per request. A version
    /// that appears again within a deflate window (32 KiB) of its previous copy (adjacent
    /// placements of a batch that show the same flow) goes out as a copy of that copy
    /// ([`copy_block`]: a few hundred bytes), as a stream compressor would send it.
    ///
    /// `Err` (the caller compresses the whole body then) when that would send many more bytes
    /// than compressing the body as one stream: when it has no shared flow, or when the bytes
    /// written for the response (JSON around the flows, small flows, fonts) are more than a
    /// quarter of the body, as they would go out uncompressed.
    pub fn finish_gzip(mut self, flows: &DeflatedFlows) -> Result<SplicedBody, Self> {
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
        // RFC 1952 header: magic, deflate, no flags, no mtime, no extra flags, OS unknown.
        const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        let mut crc = 0u32;
        let mut out = Vec::with_capacity(self.parts.len() + 2);
        let mut pending = GZIP_HEADER.to_vec();
        // Where each version's last copy starts in the uncompressed stream.
        let mut starts: Vec<(uuid::Uuid, usize)> = Vec::new();
        let mut offset = 0usize;
        for part in self.parts {
            let len = part.len();
            match part {
                Part::Owned(bytes) => {
                    let mut hasher = crc32fast::Hasher::new_with_initial(crc);
                    hasher.update(&bytes);
                    crc = hasher.finalize();
                    stored_blocks(&mut pending, &bytes, false);
                }
                Part::Flow(version) => {
                    let deflated = flows.get(&version);
                    crc = deflated.append_crc(crc);
                    let id = version.id.0;
                    let last = starts.iter_mut().find(|(seen, _)| *seen == id);
                    match last {
                        Some((_, start)) if offset - *start <= WINDOW => {
                            copy_block(&mut pending, len, offset - *start);
                            *start = offset;
                        }
                        _ => {
                            match last {
                                Some((_, start)) => *start = offset,
                                None => starts.push((id, offset)),
                            }
                            out.push(Part::Owned(Bytes::from(std::mem::take(&mut pending))));
                            out.push(Part::Owned(deflated.data.clone()));
                        }
                    }
                }
            }
            offset += len;
        }
        // The final block (empty, stored), then CRC-32 and the input length, little-endian.
        stored_blocks(&mut pending, &[], true);
        pending.extend_from_slice(&crc.to_le_bytes());
        // ISIZE: the input length modulo 2^32 (RFC 1952).
        pending.extend_from_slice(&(offset as u32).to_le_bytes());
        out.push(Part::Owned(Bytes::from(pending)));
        let len = out.iter().map(Part::len).sum::<usize>() as u64;
        Ok(SplicedBody {
            parts: out.into_iter(),
            len,
        })
    }
}

impl Spliced {
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
                Part::Flow(version) => out.extend_from_slice(version.flow_schema.get().as_bytes()),
            }
        }
        Bytes::from(out)
    }
}

/// How far back deflate can refer (RFC 1951 §3.2.5).
const WINDOW: usize = 32 * 1024;

/// Appends a deflate block (fixed Huffman codes, RFC 1951 §3.2.6) that repeats the `len`
/// bytes that start `distance` bytes back, then an empty stored block, so the stream is byte
/// aligned again for what follows (as a sync flush leaves it). `3 <= len` and
/// `1 <= distance <= 32,768`; a flow in a batch is repeated with a 20 KB flow in about 200
/// bytes, where sending its compressed copy again would cost the whole compressed size.
fn copy_block(out: &mut Vec<u8>, len: usize, distance: usize) {
    // Length symbols 257..285 and distance symbols 0..29: base value and extra bits.
    const LENGTHS: [(usize, u32); 29] = [
        (3, 0),
        (4, 0),
        (5, 0),
        (6, 0),
        (7, 0),
        (8, 0),
        (9, 0),
        (10, 0),
        (11, 1),
        (13, 1),
        (15, 1),
        (17, 1),
        (19, 2),
        (23, 2),
        (27, 2),
        (31, 2),
        (35, 3),
        (43, 3),
        (51, 3),
        (59, 3),
        (67, 4),
        (83, 4),
        (99, 4),
        (115, 4),
        (131, 5),
        (163, 5),
        (195, 5),
        (227, 5),
        (258, 0),
    ];
    const DISTANCES: [(usize, u32); 30] = [
        (1, 0),
        (2, 0),
        (3, 0),
        (4, 0),
        (5, 1),
        (7, 1),
        (9, 2),
        (13, 2),
        (17, 3),
        (25, 3),
        (33, 4),
        (49, 4),
        (65, 5),
        (97, 5),
        (129, 6),
        (193, 6),
        (257, 7),
        (385, 7),
        (513, 8),
        (769, 8),
        (1025, 9),
        (1537, 9),
        (2049, 10),
        (3073, 10),
        (4097, 11),
        (6145, 11),
        (8193, 12),
        (12289, 12),
        (16385, 13),
        (24577, 13),
    ];
    debug_assert!(len >= 3 && (1..=WINDOW).contains(&distance));
    let symbol = |table: &[(usize, u32)], value: usize| {
        let i = table.partition_point(|&(base, _)| base <= value) - 1;
        (i, table[i].0, table[i].1)
    };
    let (dist_code, dist_base, dist_extra) = symbol(&DISTANCES, distance);
    let mut bits = BitWriter::new(out);
    bits.put(0b010, 3); // not final; BTYPE 01 (fixed codes), least significant bit first
    let mut left = len;
    while left > 0 {
        // Pieces of at most 258; never leave fewer than 3 for the last one.
        let piece = match left {
            0..=258 => left,
            259..=260 => left - 3,
            _ => 258,
        };
        let (i, base, extra) = symbol(&LENGTHS, piece);
        // Fixed codes: symbols 257..279 have 7 bits (0..), 280..287 have 8 (0b1100_0000..).
        let code = 257 + i;
        if code < 280 {
            bits.huffman(code - 256, 7);
        } else {
            bits.huffman(0b1100_0000 + code - 280, 8);
        }
        bits.put(piece - base, extra);
        bits.huffman(dist_code, 5);
        bits.put(distance - dist_base, dist_extra);
        left -= piece;
    }
    bits.huffman(0, 7); // end of block (symbol 256)
    bits.put(0, 3); // an empty stored block: not final, BTYPE 00, then to the byte boundary
    bits.align();
    out.extend_from_slice(&[0, 0, 0xff, 0xff]);
}

/// Deflate's bit order: values least significant bit first, Huffman codes most significant
/// bit first, packed from the low bits of each byte.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u32,
    n: u32,
}

impl<'a> BitWriter<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        Self { out, acc: 0, n: 0 }
    }

    fn put(&mut self, value: usize, bits: u32) {
        // At most 13 extra bits at a time, so `acc` (under 8 bits between calls) never fills.
        self.acc |= (value as u32) << self.n;
        self.n += bits;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    fn huffman(&mut self, code: usize, bits: u32) {
        self.put((code as u32).reverse_bits() as usize >> (32 - bits), bits);
    }

    fn align(&mut self) {
        if self.n > 0 {
            self.out.push(self.acc as u8);
            self.acc = 0;
            self.n = 0;
        }
    }
}

/// Appends `data` as stored deflate blocks (RFC 1951 §3.2.4: at most 65,535 bytes each, byte
/// aligned); `last` marks the final block of the stream.
fn stored_blocks(out: &mut Vec<u8>, data: &[u8], last: bool) {
    if data.is_empty() {
        out.push(u8::from(last));
        out.extend_from_slice(&[0, 0, 0xff, 0xff]);
        return;
    }
    let mut chunks = data.chunks(usize::from(u16::MAX)).peekable();
    while let Some(chunk) = chunks.next() {
        let len = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
        out.push(u8::from(last && chunks.peek().is_none()));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
}

/// A `flow_schema` compressed once: raw deflate that ends on a sync flush (byte aligned, not
/// final, referring to nothing before it), so it can sit between other blocks of a stream.
#[derive(Debug)]
pub struct Deflated {
    data: Bytes,
    /// The schema's CRC-32.
    crc: u32,
    /// Appending the schema to data whose CRC-32 is `c` gives `shift · c ^ crc`, where
    /// `shift` (the effect of the schema's length of zero bytes on the CRC register) is a
    /// linear map over GF(2): column `i` is its image of bit `i`. Made once per version, it
    /// combines in 32 steps where a general combine costs one matrix squaring per bit of the
    /// length (0.27 µs per flow; 13 µs of a gzip batch of 50, docs/benchmarks.md).
    shift: [u32; 32],
}

impl Deflated {
    fn new(schema: &[u8]) -> Self {
        use std::io::Write as _;
        let mut encoder =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        // Writing to a Vec cannot fail. flush_finish() ends the data with a sync flush and
        // hands the Vec back without writing a final block.
        let _ = encoder.write_all(schema);
        let data = Bytes::from(encoder.flush_finish().unwrap_or_default());
        let crc = crc32fast::hash(schema);
        let len = schema.len() as u64;
        let shift = std::array::from_fn(|bit| {
            let mut column = crc32fast::Hasher::new_with_initial_len(1 << bit, 0);
            column.combine(&crc32fast::Hasher::new_with_initial_len(0, len));
            column.finalize()
        });
        Self { data, crc, shift }
    }

    /// The CRC-32 of data whose CRC-32 is `before`, followed by this schema.
    fn append_crc(&self, before: u32) -> u32 {
        let mut out = self.crc;
        let mut bits = before;
        while bits != 0 {
            out ^= self.shift[bits.trailing_zeros() as usize];
            bits &= bits - 1;
        }
        out
    }
}

/// The compressed `flow_schema` of each published version, made on first use and kept while
/// the version is in a served snapshot. Entries are keyed by version id and checked against
/// the version object; a reload carries them over to the next snapshot's objects when their
/// bytes are the same ([`DeflatedFlows::carry_over`]), so only new or changed versions are
/// compressed again.
#[derive(Debug, Default)]
pub struct DeflatedFlows {
    entries: std::sync::RwLock<std::collections::HashMap<uuid::Uuid, Vec<DeflatedEntry>>>,
}

/// A version object a compressed schema serves (to tell snapshots apart), and it. A version id
/// has one per snapshot that served it, so two while a reload is under way.
type DeflatedEntry = (std::sync::Weak<PublishedVersion>, Arc<Deflated>);

impl DeflatedFlows {
    /// The compressed schema of `version`.
    pub fn get(&self, version: &Arc<PublishedVersion>) -> Arc<Deflated> {
        let key = version.id.0;
        let current =
            |(weak, _): &&DeflatedEntry| std::ptr::eq(weak.as_ptr(), Arc::as_ptr(version));
        {
            let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(entry) = entries.get(&key).and_then(|e| e.iter().find(current)) {
                return Arc::clone(&entry.1);
            }
        }
        let deflated = Arc::new(Deflated::new(version.flow_schema.get().as_bytes()));
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        // Versions of replaced snapshots are dropped once they outnumber the live ones.
        if entries.len() >= 64 && entries.len().is_power_of_two() {
            entries.retain(|_, list| {
                list.retain(|(weak, _)| weak.strong_count() > 0);
                !list.is_empty()
            });
        }
        let list = entries.entry(key).or_default();
        list.retain(|(weak, _)| weak.strong_count() > 0);
        list.push((Arc::downgrade(version), Arc::clone(&deflated)));
        deflated
    }

    /// Called with the snapshot about to replace the served one, while the served one is
    /// still alive: every compressed version that `next` publishes with the very same
    /// `flow_schema` bytes (compared in full) serves `next`'s version object too. Without it,
    /// every reload, whatever it changed, compressed each served flow again on the request
    /// path. Returns how many were carried over.
    pub fn carry_over(&self, next: &Catalog) -> usize {
        // Compared under the read lock (requests keep reading); added under the write lock.
        let carried: Vec<(uuid::Uuid, DeflatedEntry)> = {
            let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
            entries
                .iter()
                .filter_map(|(id, list)| {
                    let new = published(next, FlowVersionId::from_uuid(*id))?;
                    let serves = |weak: &std::sync::Weak<PublishedVersion>| {
                        std::ptr::eq(weak.as_ptr(), Arc::as_ptr(&new))
                    };
                    if list.iter().any(|(weak, _)| serves(weak)) {
                        return None;
                    }
                    let same = list.iter().find_map(|(weak, deflated)| {
                        let old = weak.upgrade()?;
                        (old.flow_schema.get() == new.flow_schema.get())
                            .then(|| Arc::clone(deflated))
                    })?;
                    Some((*id, (Arc::downgrade(&new), same)))
                })
                .collect()
        };
        let n = carried.len();
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        for (id, entry) in carried {
            let list = entries.entry(id).or_default();
            list.retain(|(weak, _)| weak.strong_count() > 0);
            if !list.iter().any(|(weak, _)| weak.ptr_eq(&entry.0)) {
                list.push(entry);
            }
        }
        n
    }
}

/// The version object `catalog` publishes under `id`, if it publishes it.
fn published(catalog: &Catalog, id: FlowVersionId) -> Option<Arc<PublishedVersion>> {
    let at = catalog.flow_version(id)?;
    let version = catalog
        .app(at.app_id)?
        .flow(at.flow_id)?
        .published
        .as_ref()?;
    (version.id == id).then(|| Arc::clone(version))
}

/// A body of chunks with a known total length (sent with `Content-Length`).
#[derive(Debug)]
pub struct SplicedBody {
    parts: std::vec::IntoIter<Part>,
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

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    /// Stored blocks followed by a compressed flow and a final empty block decode as one raw
    /// deflate stream, for pieces of 0 bytes, a few bytes and more than one block (65,535).
    #[test]
    fn stored_blocks_and_a_deflated_part_form_one_stream() {
        let flow =
            br#"{"screens":["a","b"],"text":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#;
        let deflated = Deflated::new(flow);
        for size in [0, 10, 70_000] {
            let head: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
            let mut stream = Vec::new();
            stored_blocks(&mut stream, &head, false);
            stream.extend_from_slice(&deflated.data);
            stored_blocks(&mut stream, b"}", false);
            stored_blocks(&mut stream, &[], true);
            let mut decoded = Vec::new();
            flate2::read::DeflateDecoder::new(stream.as_slice())
                .read_to_end(&mut decoded)
                .expect("a valid deflate stream");
            let mut expected = head.clone();
            expected.extend_from_slice(flow);
            expected.push(b'}');
            assert_eq!(decoded, expected, "head of {size} bytes");
        }
    }

    fn version(schema: &str) -> Arc<PublishedVersion> {
        version_with_id(schema, 0)
    }

    fn version_with_id(schema: &str, id: u128) -> Arc<PublishedVersion> {
        Arc::new(PublishedVersion {
            id: flowgate_domain::ids::FlowVersionId(uuid::Uuid::from_u128(id)),
            flow_id: flowgate_domain::ids::FlowId(uuid::Uuid::nil()),
            version: 1,
            schema_version: 1,
            flow_schema: serde_json::value::RawValue::from_string(schema.to_owned()).unwrap(),
            fonts: Vec::new(),
            fonts_json: serde_json::value::RawValue::from_string("[]".to_owned()).unwrap(),
        })
    }

    fn inflate(deflated: &Deflated) -> String {
        let mut stream = deflated.data.to_vec();
        stored_blocks(&mut stream, &[], true);
        let mut text = String::new();
        flate2::read::DeflateDecoder::new(stream.as_slice())
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    /// `len` characters that compress to about three quarters (a copy of a flow must cost
    /// visibly less than compressing it again).
    fn noise(seed: &str, len: usize) -> String {
        const ALPHABET: &[u8; 64] =
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
        let mut state = seed
            .bytes()
            .fold(0x9e37_79b9_u32, |h, b| h.rotate_left(5) ^ u32::from(b));
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                char::from(ALPHABET[(state >> 26) as usize])
            })
            .collect()
    }

    /// A flow of about 2.4 KB.
    fn large_schema(tag: &str) -> String {
        format!(r#"{{"tag":"{tag}","text":"{}"}}"#, noise(tag, 2400))
    }

    fn gunzip(body: SplicedBody) -> Vec<u8> {
        let bytes: Vec<u8> = body.parts.flat_map(|p| p.into_bytes().to_vec()).collect();
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes.as_slice())
            .read_to_end(&mut out)
            .expect("one gzip member");
        out
    }

    /// Appending a schema's CRC by its precomputed shift gives the CRC of the whole, for
    /// schemas and prefixes of many lengths (empty, short, longer than 64 KiB).
    #[test]
    fn appended_crc_is_the_crc_of_the_whole() {
        for (prefix_len, schema_len) in [(0, 5), (1, 1), (7, 300), (1000, 20_000), (70_000, 3)] {
            let prefix: Vec<u8> = noise("p", prefix_len).into_bytes();
            let schema = noise("s", schema_len);
            let deflated = Deflated::new(schema.as_bytes());
            let whole = [prefix.as_slice(), schema.as_bytes()].concat();
            assert_eq!(
                deflated.append_crc(crc32fast::hash(&prefix)),
                crc32fast::hash(&whole),
                "{prefix_len} + {schema_len}"
            );
        }
    }

    /// A snapshot of one app publishing `schemas` (version i of flow i, ids from 1).
    fn snapshot(schemas: &[&str]) -> Catalog {
        let id = |kind: u32, n: usize| format!("{kind:08}-0000-4000-8000-{n:012}");
        let flows: Vec<String> = schemas
            .iter()
            .enumerate()
            .map(|(i, schema)| {
                format!(
                    r#"{{"id":"{}","name":"f","published_version":1,"versions":[{{"id":"{}","version":1,"schema_version":1,"fonts":[],"flow_schema":{schema}}}]}}"#,
                    id(30_000_000, i + 1),
                    id(40_000_000, i + 1)
                )
            })
            .collect();
        let text = format!(
            r#"{{"workspaces":[{{"id":"{}","name":"w","apps":[{{"id":"{}","name":"a","media_base_url":"https://cdn.example.com/m/","icon_base_url":"https://cdn.example.com/i/","flows":[{}],"placements":[]}}]}}]}}"#,
            id(10_000_000, 1),
            id(20_000_000, 1),
            flows.join(",")
        );
        Catalog::build(serde_json::from_str(&text).unwrap()).unwrap()
    }

    fn published_at(catalog: &Catalog, n: usize) -> Arc<PublishedVersion> {
        let id = format!("40000000-0000-4000-8000-{n:012}");
        published(catalog, FlowVersionId::from_uuid(id.parse().unwrap())).unwrap()
    }

    /// A reload keeps the compressed form of every version whose bytes did not change (the
    /// same object, not compressed again), compresses a changed one afresh, and the snapshot
    /// being replaced keeps being served its own.
    #[test]
    fn a_reload_keeps_compressed_flows_whose_bytes_did_not_change() {
        let flows = DeflatedFlows::default();
        let (same, old_text, new_text) = (
            large_schema("same"),
            large_schema("old"),
            large_schema("new"),
        );
        let before = snapshot(&[&same, &old_text]);
        let (same_before, changed_before) = (published_at(&before, 1), published_at(&before, 2));
        let kept = flows.get(&same_before);
        let replaced = flows.get(&changed_before);
        // The next snapshot: version 1 unchanged, version 2 republished with other bytes
        // (immutable versions make that an import mistake, but it must not serve stale bytes).
        let after = snapshot(&[&same, &new_text]);
        assert_eq!(flows.carry_over(&after), 1);
        assert_eq!(flows.carry_over(&after), 0, "already carried");
        let (same_after, changed_after) = (published_at(&after, 1), published_at(&after, 2));
        assert!(!Arc::ptr_eq(&same_before, &same_after), "a new object");
        assert!(
            Arc::ptr_eq(&flows.get(&same_after), &kept),
            "not compressed again"
        );
        let fresh = flows.get(&changed_after);
        assert!(!Arc::ptr_eq(&fresh, &replaced));
        assert_eq!(inflate(&fresh), new_text);
        // In-flight requests of the replaced snapshot still get theirs.
        assert!(Arc::ptr_eq(&flows.get(&same_before), &kept));
        assert!(Arc::ptr_eq(&flows.get(&changed_before), &replaced));
        assert_eq!(inflate(&flows.get(&changed_before)), old_text);
        // Once it is gone, the next reload carries both from the snapshot now served.
        drop((before, same_before, changed_before));
        let again = snapshot(&[&same, &new_text]);
        assert_eq!(flows.carry_over(&again), 2);
    }

    /// Distinct large flows with little JSON around them are spliced; a repeated version or a
    /// body mostly of the response's own bytes is left to a whole-body compressor.
    #[test]
    fn gzip_splices_only_when_it_does_not_cost_bytes() {
        let flows = DeflatedFlows::default();
        let (a, b) = (
            version_with_id(&large_schema("a"), 1),
            version_with_id(&large_schema("b"), 2),
        );
        let body = |versions: &[&Arc<PublishedVersion>], own: usize| {
            let mut body = Spliced::with_capacity(64);
            body.buf().extend_from_slice(&vec![b' '; own]);
            for v in versions {
                body.buf().push(b'[');
                body.splice_schema(v);
                body.buf().push(b']');
            }
            body
        };
        let spliced = body(&[&a, &b], 100).finish_gzip(&flows).expect("spliced");
        let mut expected = vec![b' '; 100];
        for v in [&a, &b] {
            expected.push(b'[');
            expected.extend_from_slice(v.flow_schema.get().as_bytes());
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
        let own = a.flow_schema.get().len() * 2;
        assert!(
            body(&[&a, &b], own).finish_gzip(&flows).is_err(),
            "mostly own bytes"
        );
        assert!(body(&[], 100).finish_gzip(&flows).is_err(), "no flow");
    }

    /// A copy block repeats what precedes it, at any length and distance deflate allows, and
    /// leaves the stream byte aligned.
    #[test]
    fn copy_blocks_repeat_earlier_bytes() {
        let source: Vec<u8> = (0..40_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for (len, distance) in [
            (3, 3),
            (3, 1),
            (10, 4),
            (258, 258),
            (259, 300),
            (260, 260),
            (261, 1000),
            (516, 516),
            (20_284, 20_500),
            (32_768, 32_768),
            (5, 32_768),
        ] {
            let prefix = &source[..distance.max(len)];
            let mut stream = Vec::new();
            stored_blocks(&mut stream, prefix, false);
            let before = stream.len();
            copy_block(&mut stream, len, distance);
            let copy = stream.len() - before;
            stored_blocks(&mut stream, b"end", true);
            let mut decoded = Vec::new();
            flate2::read::DeflateDecoder::new(stream.as_slice())
                .read_to_end(&mut decoded)
                .unwrap_or_else(|e| panic!("len {len} distance {distance}: {e}"));
            let mut expected = prefix.to_vec();
            for i in 0..len {
                expected.push(expected[prefix.len() - distance + i]);
            }
            expected.extend_from_slice(b"end");
            assert_eq!(decoded, expected, "len {len} distance {distance}");
            // At most 31 bits per piece of up to 258 bytes, and 6 bytes of block framing.
            assert!(
                copy <= 10 + 4 * len.div_ceil(256),
                "len {len}: the copy costs {copy} bytes"
            );
        }
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
            let flows = DeflatedFlows::default();
            let versions: Vec<_> = sizes
                .iter()
                .enumerate()
                .map(|(i, &size)| {
                    let text = noise(&i.to_string(), size);
                    version_with_id(&format!("{{\"t\":\"{text}\"}}"), i as u128 + 1)
                })
                .collect();
            let build = || {
                let mut body = Spliced::with_capacity(64);
                for &(flow, own) in &layout {
                    body.buf().extend(std::iter::repeat_n(b'x', own));
                    body.splice_schema(&versions[flow % versions.len()]);
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
            let mut body = Spliced::with_capacity(16);
            body.buf().extend_from_slice(b"{\"a\":");
            body.splice_schema(&a);
            body.buf().extend_from_slice(b",\"b\":");
            body.splice_schema(&b);
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

    /// The same version object reuses its compressed schema; a new snapshot's version with
    /// the same id (a re-import may change it) is compressed afresh.
    #[test]
    fn deflated_flows_follow_the_served_version_object() {
        let flows = DeflatedFlows::default();
        let old = version(r#"{"screens":["old"]}"#);
        let first = flows.get(&old);
        assert!(Arc::ptr_eq(&first, &flows.get(&old)), "reused");
        assert_eq!(inflate(&first), r#"{"screens":["old"]}"#);
        let new = version(r#"{"screens":["new"]}"#);
        assert_eq!(inflate(&flows.get(&new)), r#"{"screens":["new"]}"#);
    }
}
