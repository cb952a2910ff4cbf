//! Deterministic experiment assignment (D5), bit-for-bit compatible with GrowthBook's SDKs so
//! an assignment can be reproduced offline by any of them.
//!
//! All arithmetic is `f64`, summed in list order, as in the JavaScript reference.

/// 32-bit FNV-1a over UTF-16 code units, fed incrementally so that `seed + value` needs no
/// concatenated string. JavaScript hashes `charCodeAt(i)`, i.e. UTF-16 code units, so a
/// non-ASCII user id hashes the same here as in GrowthBook's JavaScript SDK (D5).
#[derive(Clone, Copy, Debug)]
struct Fnv1a32(u32);

impl Fnv1a32 {
    const OFFSET: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;

    fn new() -> Self {
        Self(Self::OFFSET)
    }

    fn write_str(mut self, s: &str) -> Self {
        for unit in s.encode_utf16() {
            self.0 ^= u32::from(unit);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
        self
    }

    /// ASCII bytes are their own UTF-16 code units.
    fn write_ascii(mut self, bytes: &[u8]) -> Self {
        for &b in bytes {
            self.0 ^= u32::from(b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
        self
    }
}

/// `fnv1a32` of a string, over its UTF-16 code units.
pub fn fnv1a32(s: &str) -> u32 {
    Fnv1a32::new().write_str(s).0
}

/// Writes the base-10 form of `n` into `buf` and returns the digits, without allocating.
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        // `n % 10` is below 10, so the cast cannot truncate.
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// GrowthBook hash version 2 (D5): `fnv1a32(decimal(fnv1a32(seed + value))) % 10000 / 10000`,
/// a number in `[0, 1)` with four decimals.
pub fn hash_v2(seed: &str, value: &str) -> f64 {
    let inner = Fnv1a32::new().write_str(seed).write_str(value).0;
    let mut buf = [0u8; 10];
    let outer = Fnv1a32::new().write_ascii(decimal(inner, &mut buf)).0;
    f64::from(outer % 10_000) / 10_000.0
}

/// GrowthBook hash version 1: `fnv1a32(value + seed) % 1000 / 1000`. Used only by namespaces,
/// where GrowthBook keeps the original algorithm for compatibility.
pub fn hash_v1(seed: &str, value: &str) -> f64 {
    let h = Fnv1a32::new().write_str(value).write_str(seed).0;
    f64::from(h % 1_000) / 1_000.0
}

/// GrowthBook's `hash(seed, value, version)`: `None` for an unsupported version.
pub fn hash(seed: &str, value: &str, version: u32) -> Option<f64> {
    match version {
        1 => Some(hash_v1(seed, value)),
        2 => Some(hash_v2(seed, value)),
        _ => None,
    }
}

/// Equal weights for `n` variants (`1/n` each); empty for `n <= 0`.
pub fn equal_weights(n: i64) -> Vec<f64> {
    match usize::try_from(n) {
        Ok(count) if count > 0 => vec![1.0 / count as f64; count],
        _ => Vec::new(),
    }
}

/// A half-open bucket range `[start, end)` of the hash space owned by one variant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BucketRange {
    /// Inclusive start.
    pub start: f64,
    /// Exclusive end.
    pub end: f64,
}

impl BucketRange {
    /// True when `n` falls in `[start, end)`.
    pub fn contains(&self, n: f64) -> bool {
        n >= self.start && n < self.end
    }
}

/// GrowthBook's `getBucketRanges`: coverage is clamped to `[0, 1]`; missing weights, a wrong
/// number of weights, or weights not summing to 1 (within 0.01) fall back to equal weights.
/// Variant `i` owns `[cum_i, cum_i + coverage * w_i)` (D5), so raising coverage adds users
/// without moving anyone.
pub fn bucket_ranges(
    num_variations: usize,
    coverage: f64,
    weights: Option<&[f64]>,
) -> Vec<BucketRange> {
    let coverage = if coverage.is_nan() {
        0.0
    } else {
        coverage.clamp(0.0, 1.0)
    };
    let equal;
    let mut chosen: &[f64] = match weights {
        Some(w) if w.len() == num_variations => w,
        _ => {
            equal = equal_weights(num_variations as i64);
            &equal
        }
    };
    let total: f64 = chosen.iter().sum();
    let fallback;
    if !(0.99..=1.01).contains(&total) {
        fallback = equal_weights(num_variations as i64);
        chosen = &fallback;
    }
    let mut cumulative = 0.0;
    chosen
        .iter()
        .map(|w| {
            let start = cumulative;
            cumulative += w;
            BucketRange {
                start,
                end: start + coverage * w,
            }
        })
        .collect()
}

/// GrowthBook's `chooseVariation`: the index of the first range holding `n`, or `None` when the
/// user is outside every range (outside the experiment's coverage).
pub fn choose_variation(n: f64, ranges: &[BucketRange]) -> Option<usize> {
    ranges.iter().position(|r| r.contains(n))
}

/// A mutual-exclusion namespace (D5): `[id, start, end)`; a user takes part only when the
/// version-1 hash of `"__" + id` falls inside.
#[derive(Clone, Debug, PartialEq)]
pub struct Namespace {
    /// The namespace id.
    pub id: String,
    /// Inclusive start in `[0, 1]`.
    pub start: f64,
    /// Exclusive end in `[0, 1]`.
    pub end: f64,
}

impl Namespace {
    /// GrowthBook's `inNamespace(userId, [id, start, end])`.
    pub fn contains(&self, user_id: &str) -> bool {
        self.includes(self.hash(user_id))
    }

    /// The user's namespace hash: `hash_v1("__" + id, user_id)`, in `[0, 1)` with three
    /// decimals.
    pub fn hash(&self, user_id: &str) -> f64 {
        let h = Fnv1a32::new()
            .write_str(user_id)
            .write_ascii(b"__")
            .write_str(&self.id)
            .0;
        f64::from(h % 1_000) / 1_000.0
    }

    /// True when a namespace hash falls in `[start, end)`.
    pub fn includes(&self, hash: f64) -> bool {
        hash >= self.start && hash < self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_reference_values() {
        // Reference values of 32-bit FNV-1a.
        assert_eq!(fnv1a32(""), 0x811c_9dc5);
        assert_eq!(fnv1a32("a"), 0xe40c_292c);
        assert_eq!(fnv1a32("foobar"), 0xbf9c_f968);
    }

    #[test]
    fn non_ascii_hashes_over_utf16_code_units() {
        // "é" is one UTF-16 unit (0x00E9) but two UTF-8 bytes; "😀" is a surrogate pair.
        let utf16_e = (0x811c_9dc5u32 ^ 0xE9).wrapping_mul(0x0100_0193);
        assert_eq!(fnv1a32("é"), utf16_e);
        let mut h = 0x811c_9dc5u32;
        for unit in [0xD83Du32, 0xDE00] {
            h = (h ^ unit).wrapping_mul(0x0100_0193);
        }
        assert_eq!(fnv1a32("😀"), h);
    }

    #[test]
    fn decimal_writes_every_width() {
        let mut buf = [0u8; 10];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(7, &mut buf), b"7");
        assert_eq!(decimal(4_294_967_295, &mut buf), b"4294967295");
    }

    #[test]
    fn hash_v2_equals_the_string_concatenation_definition() {
        let inner = fnv1a32("seeduser-1");
        let expected = f64::from(fnv1a32(&inner.to_string()) % 10_000) / 10_000.0;
        assert_eq!(hash_v2("seed", "user-1"), expected);
    }

    #[test]
    fn namespace_uses_hash_v1_of_prefixed_id() {
        let ns = Namespace {
            id: "ns".into(),
            start: 0.0,
            end: 1.0,
        };
        let n = hash_v1("__ns", "u");
        assert!(ns.contains("u"));
        let narrow = Namespace {
            id: "ns".into(),
            start: n,
            end: n,
        };
        assert!(!narrow.contains("u"), "end is exclusive");
    }
}
