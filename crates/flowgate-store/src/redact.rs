//! The password of a database URL: found in one place, for [`redact_url`] (URLs in logs and
//! messages) and for scrubbing error messages of the PostgreSQL connector.

use std::ops::Range;

use percent_encoding::percent_decode_str;

/// The URL with the password of its `scheme://user:password@host/...` authority replaced by
/// `***`, for logs and messages; a URL without a password comes back as it is.
pub fn redact_url(url: &str) -> String {
    match password_span(url) {
        Some(span) => format!("{}***{}", &url[..span.start], &url[span.end..]),
        None => url.to_owned(),
    }
}

/// The password of the URL as written and, when that differs, percent-decoded: the forms an
/// error message might quote. Empty when the URL has none.
pub(crate) fn url_password(url: &str) -> Vec<String> {
    let Some(span) = password_span(url) else {
        return Vec::new();
    };
    let password = &url[span];
    let mut secrets = vec![password.to_owned()];
    let decoded = percent_decode_str(password)
        .decode_utf8_lossy()
        .into_owned();
    if decoded != password {
        secrets.push(decoded);
    }
    secrets.retain(|s| !s.is_empty());
    secrets
}

/// `message` with every one of `secrets` replaced by `***`.
pub(crate) fn scrub(message: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .fold(message.to_owned(), |m, s| m.replace(s.as_str(), "***"))
}

/// Where the password is in `scheme://user:password@host/...`: between the first `:` of the
/// user information and its last `@` (a password may hold `@` unencoded; a host cannot).
fn password_span(url: &str) -> Option<Range<usize>> {
    let start = url.find("://")? + 3;
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let at = authority.rfind('@')?;
    let colon = authority[..at].find(':')?;
    Some(start + colon + 1..start + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_redacted_and_nothing_else() {
        assert_eq!(
            redact_url("postgres://fg:s3cret@db:5432/fg?sslmode=require"),
            "postgres://fg:***@db:5432/fg?sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://fg:p@ss@db/fg"),
            "postgres://fg:***@db/fg"
        );
        for plain in [
            "postgres://fg@db:5432/fg",
            "postgres://db/fg?user=a:b@c",
            "sqlite://data/x.db",
            "nats://127.0.0.1:4222",
        ] {
            assert_eq!(redact_url(plain), plain);
        }
    }

    #[test]
    fn the_password_is_found_raw_and_decoded() {
        assert_eq!(
            url_password("postgres://u:p%40ss@h:5/db?x=1"),
            vec!["p%40ss".to_owned(), "p@ss".to_owned()]
        );
        assert!(url_password("postgres://u@h/db").is_empty());
        assert!(url_password("postgres://h/db").is_empty());
        assert!(url_password("postgres://u:@h/db").is_empty());
    }
}
