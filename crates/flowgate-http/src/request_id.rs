//! `X-Request-Id` (D11): a valid incoming id is echoed, otherwise a new UUIDv7 is made.

/// The request's id, stored in the request extensions for handlers and problem bodies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestId(pub String);

/// Header name.
pub const HEADER: &str = "x-request-id";

/// An incoming id is kept when it is 1..=128 characters of `A-Za-z0-9._:-`, so it is safe to
/// log and echo; anything else is replaced.
pub fn accept_or_new(incoming: Option<&str>) -> RequestId {
    match incoming {
        Some(id)
            if (1..=128).contains(&id.len())
                && id.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-')
                }) =>
        {
            RequestId(id.to_owned())
        }
        _ => RequestId(uuid::Uuid::now_v7().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_ids_are_echoed_and_others_replaced() {
        assert_eq!(accept_or_new(Some("abc-123_x.y:z")).0, "abc-123_x.y:z");
        for bad in ["", "has space", "quote\"", &"x".repeat(129)] {
            let id = accept_or_new(Some(bad)).0;
            assert_ne!(id, bad);
            assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 7);
        }
        assert_eq!(
            uuid::Uuid::parse_str(&accept_or_new(None).0)
                .unwrap()
                .get_version_num(),
            7
        );
    }
}
