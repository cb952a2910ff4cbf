//! gzip framing (RFC 1952) around flows compressed ahead of time: a response's own bytes go
//! out as stored deflate blocks (RFC 1951 §3.2.4), each flow as its raw deflate data that
//! ends on a sync flush, and a flow repeated within the deflate window as a back-reference
//! ([`copy_block`]). The CRC-32 of the whole is combined from each piece's, so a gzip response
//! holding large flows costs no compressor run per request (P7).
//!
//! No crate writes deflate streams from pre-compressed pieces: flate2 and miniz compress a
//! whole stream, so this module frames the pieces itself and leaves compression to flate2.

use actix_web::web::Bytes;

/// One gzip member built piece by piece: [`GzipMember::stored`] for bytes written for the
/// response, [`GzipMember::flow`] for a flow compressed ahead of time.
pub(crate) struct GzipMember {
    /// Finished chunks: stored blocks, flows' deflate data.
    out: Vec<Bytes>,
    /// Framing and stored bytes not yet moved into `out`.
    pending: Vec<u8>,
    /// CRC-32 of the uncompressed bytes so far.
    crc: u32,
    /// Uncompressed bytes so far.
    offset: usize,
    /// Where each flow's last copy starts in the uncompressed stream.
    starts: Vec<(uuid::Uuid, usize)>,
}

impl GzipMember {
    /// A member with its header written; `pieces` sizes the chunk list.
    pub(crate) fn new(pieces: usize) -> Self {
        // RFC 1952 header: magic, deflate, no flags, no mtime, no extra flags, OS unknown.
        const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        Self {
            out: Vec::with_capacity(pieces + 2),
            pending: GZIP_HEADER.to_vec(),
            crc: 0,
            offset: 0,
            starts: Vec::new(),
        }
    }

    /// Appends bytes as stored (uncompressed) blocks.
    pub(crate) fn stored(&mut self, bytes: &[u8]) {
        let mut hasher = crc32fast::Hasher::new_with_initial(self.crc);
        hasher.update(bytes);
        self.crc = hasher.finalize();
        stored_blocks(&mut self.pending, bytes, false);
        self.offset += bytes.len();
    }

    /// Appends flow `id` of `len` uncompressed bytes: a copy of its previous copy when that is
    /// within the deflate window, else its compressed data.
    pub(crate) fn flow(&mut self, id: uuid::Uuid, len: usize, deflated: &DeflatedFlow) {
        self.crc = deflated.append_crc(self.crc);
        let offset = self.offset;
        let last = self.starts.iter_mut().find(|(seen, _)| *seen == id);
        match last {
            Some((_, start)) if offset - *start <= WINDOW => {
                copy_block(&mut self.pending, len, offset - *start);
                *start = offset;
            }
            _ => {
                match last {
                    Some((_, start)) => *start = offset,
                    None => self.starts.push((id, offset)),
                }
                self.out
                    .push(Bytes::from(std::mem::take(&mut self.pending)));
                self.out.push(deflated.data.clone());
            }
        }
        self.offset += len;
    }

    /// The member's chunks: the final block (empty, stored), then the CRC-32 and the input
    /// length, little-endian.
    pub(crate) fn finish(mut self) -> Vec<Bytes> {
        stored_blocks(&mut self.pending, &[], true);
        self.pending.extend_from_slice(&self.crc.to_le_bytes());
        // ISIZE: the input length modulo 2^32 (RFC 1952).
        self.pending
            .extend_from_slice(&(self.offset as u32).to_le_bytes());
        self.out.push(Bytes::from(self.pending));
        self.out
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
pub(super) fn stored_blocks(out: &mut Vec<u8>, data: &[u8], last: bool) {
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
pub(crate) struct DeflatedFlow {
    pub(crate) data: Bytes,
    /// The schema's CRC-32.
    crc: u32,
    /// Appending the schema to data whose CRC-32 is `c` gives `shift · c ^ crc`, where
    /// `shift` (the effect of the schema's length of zero bytes on the CRC register) is a
    /// linear map over GF(2): column `i` is its image of bit `i`. Made once per version, it
    /// combines in 32 steps where a general combine costs one matrix squaring per bit of the
    /// length.
    shift: [u32; 32],
}

impl DeflatedFlow {
    /// Compresses `schema`.
    pub(crate) fn new(schema: &[u8]) -> Self {
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
    pub(crate) fn append_crc(&self, before: u32) -> u32 {
        let mut out = self.crc;
        let mut bits = before;
        while bits != 0 {
            out ^= self.shift[bits.trailing_zeros() as usize];
            bits &= bits - 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;
    use crate::response::test_support::noise;

    /// Stored blocks followed by a compressed flow and a final empty block decode as one raw
    /// deflate stream, for pieces of 0 bytes, a few bytes and more than one block (65,535).
    #[test]
    fn stored_blocks_and_a_deflated_part_form_one_stream() {
        let flow =
            br#"{"screens":["a","b"],"text":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#;
        let deflated = DeflatedFlow::new(flow);
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

    /// Appending a schema's CRC by its precomputed shift gives the CRC of the whole, for
    /// schemas and prefixes of many lengths (empty, short, longer than 64 KiB).
    #[test]
    fn appended_crc_is_the_crc_of_the_whole() {
        for (prefix_len, schema_len) in [(0, 5), (1, 1), (7, 300), (1000, 20_000), (70_000, 3)] {
            let prefix: Vec<u8> = noise("p", prefix_len).into_bytes();
            let schema = noise("s", schema_len);
            let deflated = DeflatedFlow::new(schema.as_bytes());
            let whole = [prefix.as_slice(), schema.as_bytes()].concat();
            assert_eq!(
                deflated.append_crc(crc32fast::hash(&prefix)),
                crc32fast::hash(&whole),
                "{prefix_len} + {schema_len}"
            );
        }
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
}
