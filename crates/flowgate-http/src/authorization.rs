//! The `Authorization` header (D1, D9): where the API's and the admin API's callers present
//! their key or token. The domain authenticates a key; reading it out of a request is HTTP's.

/// The token of an `Authorization` header value: `Bearer <token>`, the scheme matched
/// case-insensitively as RFC 9110 requires, the token trimmed; `None` for another scheme or
/// no token.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_token_is_read_and_other_schemes_are_not() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer   abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }
}
