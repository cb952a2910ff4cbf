//! `X-Request-Id` (D11): a valid incoming id is echoed, otherwise a new UUIDv7 is made.

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::web::Bytes;

/// The request's id, stored in the request extensions for handlers and problem bodies. It is
/// kept as the header value it is answered with: an echoed id shares the request's bytes, and
/// a new one is formatted once, with no `String` beside its header value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestId(HeaderValue);

impl RequestId {
    /// The id's text (only header-safe ASCII, see [`accept_or_new`]).
    pub fn as_str(&self) -> &str {
        // Always ASCII: both constructors below guarantee it.
        self.0.to_str().unwrap_or("-")
    }

    /// The `X-Request-Id` value.
    pub fn header_value(&self) -> &HeaderValue {
        &self.0
    }
}

/// Header name, as text.
pub const HEADER: &str = "x-request-id";

/// Header name. A constant: looking a header up by `&str` makes a `HeaderName`, which
/// allocates for names that are not standard.
pub const HEADER_NAME: HeaderName = HeaderName::from_static(HEADER);

/// An incoming id is kept when it is 1..=128 characters of `A-Za-z0-9._:-`, so it is safe to
/// log and echo; anything else is replaced.
pub fn accept_or_new(incoming: Option<&HeaderValue>) -> RequestId {
    if let Some(value) = incoming {
        let id = value.as_bytes();
        if (1..=128).contains(&id.len())
            && id
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
        {
            // Shares the request's bytes: no copy.
            return RequestId(value.clone());
        }
    }
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    new_v7().hyphenated().encode_lower(&mut text);
    // Owned by a reference-counted `Bytes`: the clones the dispatcher makes (extension,
    // response header) only count references. A value copied from a `&str` would allocate
    // again on its first clone.
    RequestId(
        HeaderValue::from_maybe_shared(Bytes::from_owner(text))
            .unwrap_or(HeaderValue::from_static("-")),
    )
}

thread_local! {
    /// This thread's UUIDv7 context. `Uuid::now_v7` shares one context (behind a lock) between
    /// all threads, so every request id written meant a write to a cache line every worker
    /// writes. Ids stay unique across threads: each context seeds its counter at random, and
    /// 32 more bits of each id are random (RFC 9562 §6.2, method 1); they are ordered within a
    /// thread, and by millisecond across threads.
    static CONTEXT_V7: uuid::ContextV7 = const { uuid::ContextV7::new() };
}

/// A new UUIDv7 from this thread's context.
fn new_v7() -> uuid::Uuid {
    CONTEXT_V7.with(|context| uuid::Uuid::new_v7(uuid::Timestamp::now(context)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(incoming: Option<&str>) -> String {
        let value = incoming.map(|s| HeaderValue::from_bytes(s.as_bytes()).unwrap());
        accept_or_new(value.as_ref()).as_str().to_owned()
    }

    #[test]
    fn valid_ids_are_echoed_and_others_replaced() {
        assert_eq!(id(Some("abc-123_x.y:z")), "abc-123_x.y:z");
        for bad in ["", "has space", "quote\"", "caf\u{e9}", &"x".repeat(129)] {
            let new = id(Some(bad));
            assert_ne!(new, bad);
            assert_eq!(uuid::Uuid::parse_str(&new).unwrap().get_version_num(), 7);
        }
        let new = id(None);
        assert_eq!(new.len(), 36, "hyphenated: {new}");
        assert_eq!(new, new.to_ascii_lowercase());
        assert_eq!(uuid::Uuid::parse_str(&new).unwrap().get_version_num(), 7);
        assert_ne!(id(None), new, "a new id per request");
    }

    #[test]
    fn ids_are_unique_across_threads_and_ordered_within_one() {
        let per_thread: Vec<Vec<uuid::Uuid>> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..5_000).map(|_| new_v7()).collect::<Vec<_>>()))
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for ids in &per_thread {
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "monotonic within a thread"
            );
            assert!(ids.iter().all(|id| id.get_version_num() == 7));
        }
        let all: std::collections::HashSet<_> = per_thread.iter().flatten().collect();
        assert_eq!(all.len(), 20_000, "no id repeats across threads");
    }
}
