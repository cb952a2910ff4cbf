//! The secrets of a database URL, found in one place (D25), for [`redact_url`] (URLs in logs,
//! errors and endpoints) and for scrubbing error messages of the PostgreSQL connector.
//!
//! Every form libpq accepts is covered: the password of a URL's user information
//! (`postgres://user:secret@host/db`), the `password` and `sslpassword` parameters of a URL's
//! query (`postgres://host/db?user=u&password=secret`), and the same keywords in a key=value
//! connection string (`host=h password=secret`, `password = 'it''s'`, with libpq's quoting).

use std::ops::Range;

use percent_encoding::percent_decode_str;

/// The keywords whose values are secrets (libpq's names).
const SECRET_KEYWORDS: [&str; 2] = ["password", "sslpassword"];

/// The URL or connection string with every secret replaced by `***`, for logs, errors and
/// endpoints; one without secrets comes back as it is.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    let mut spans: Vec<Range<usize>> = secret_spans(url).into_iter().map(|(r, _)| r).collect();
    spans.sort_by_key(|r| std::cmp::Reverse(r.start));
    for span in spans {
        out.replace_range(span, "***");
    }
    out
}

/// Every secret of the URL as written and, where that differs, as decoded (percent-decoded in
/// a URL, unquoted in a key=value string): the forms an error message might quote.
pub(crate) fn url_password(url: &str) -> Vec<String> {
    let mut secrets = Vec::new();
    for (span, decoded) in secret_spans(url) {
        secrets.push(url[span].to_owned());
        secrets.push(decoded);
    }
    secrets.retain(|s| !s.is_empty());
    secrets.sort();
    secrets.dedup();
    // Longest first, so a secret that contains another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets
}

/// `message` with every one of `secrets` replaced by `***`.
pub(crate) fn scrub(message: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .fold(message.to_owned(), |m, s| m.replace(s.as_str(), "***"))
}

/// Where each secret is, with its decoded value.
fn secret_spans(url: &str) -> Vec<(Range<usize>, String)> {
    match url.find("://") {
        Some(scheme_end) if !url[..scheme_end].contains(char::is_whitespace) => {
            url_secrets(url, scheme_end + 3)
        }
        _ => keyword_secrets(url),
    }
}

/// `scheme://user:password@host/path?password=...&sslpassword=...`: the user information's
/// password (between the first `:` and the last `@` of the authority: a password may hold `@`
/// unencoded, a host cannot) and the secret query parameters.
fn url_secrets(url: &str, start: usize) -> Vec<(Range<usize>, String)> {
    let decode = |raw: &str| percent_decode_str(raw).decode_utf8_lossy().into_owned();
    let mut found = Vec::new();
    let rest = &url[start..];
    let authority_end = start + rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &url[start..authority_end];
    if let Some(at) = authority.rfind('@') {
        if let Some(colon) = authority[..at].find(':') {
            let span = start + colon + 1..start + at;
            if !span.is_empty() {
                found.push((span.clone(), decode(&url[span])));
            }
        }
    }
    if let Some(q) = url[authority_end..].find('?') {
        let query_start = authority_end + q + 1;
        let query_end = url[query_start..]
            .find('#')
            .map_or(url.len(), |h| query_start + h);
        let mut at = query_start;
        for pair in url[query_start..query_end].split('&') {
            if let Some(eq) = pair.find('=') {
                let key = decode(&pair[..eq]);
                let span = at + eq + 1..at + pair.len();
                if is_secret_keyword(&key) && !span.is_empty() {
                    found.push((span.clone(), decode(&url[span])));
                }
            }
            at += pair.len() + 1;
        }
    }
    found
}

/// `keyword = value ...` (libpq's key=value connection string): values are single words, or
/// single-quoted with `\'` and `\\` escapes.
fn keyword_secrets(text: &str) -> Vec<(Range<usize>, String)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    let skip_space = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    loop {
        i = skip_space(i);
        if i >= bytes.len() {
            return found;
        }
        let key_start = i;
        while i < bytes.len() && bytes[i] != b'=' && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &text[key_start..i];
        i = skip_space(i);
        if i >= bytes.len() || bytes[i] != b'=' {
            // Not key=value: nothing here is a keyword's value.
            continue;
        }
        i = skip_space(i + 1);
        let value_start = i;
        let mut value = String::new();
        if i < bytes.len() && bytes[i] == b'\'' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'\'' {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                }
                let ch = text[i..].chars().next().unwrap_or('\0');
                value.push(ch);
                i += ch.len_utf8();
            }
            i = (i + 1).min(bytes.len());
        } else {
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                }
                let ch = text[i..].chars().next().unwrap_or('\0');
                value.push(ch);
                i += ch.len_utf8();
            }
        }
        if is_secret_keyword(key) && i > value_start {
            found.push((value_start..i, value));
        }
    }
}

fn is_secret_keyword(key: &str) -> bool {
    SECRET_KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_of_the_user_information_is_redacted_and_nothing_else() {
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
            "host=db user=fg dbname=fg",
            "",
        ] {
            assert_eq!(redact_url(plain), plain);
        }
    }

    #[test]
    fn password_parameters_of_a_url_query_are_redacted() {
        assert_eq!(
            redact_url("postgres://host/db?user=u&password=s3cret"),
            "postgres://host/db?user=u&password=***"
        );
        assert_eq!(
            redact_url(
                "postgresql://u@host/db?sslpassword=k3y&sslmode=verify-full&password=p%40ss"
            ),
            "postgresql://u@host/db?sslpassword=***&sslmode=verify-full&password=***"
        );
        // Both forms at once, and an encoded parameter name.
        assert_eq!(
            redact_url("postgres://u:one@h/db?pass%77ord=two"),
            "postgres://u:***@h/db?pass%77ord=***"
        );
        assert_eq!(
            redact_url("postgres://h/db?password="),
            "postgres://h/db?password="
        );
    }

    #[test]
    fn keyword_value_connection_strings_are_redacted() {
        assert_eq!(
            redact_url("host=db user=fg password=s3cret dbname=fg"),
            "host=db user=fg password=*** dbname=fg"
        );
        assert_eq!(
            redact_url("host=db password = 'it\\'s a secret' sslpassword=x"),
            "host=db password = *** sslpassword=***"
        );
        assert_eq!(redact_url("PASSWORD=abc"), "PASSWORD=***");
    }

    #[test]
    fn every_secret_is_found_raw_and_decoded() {
        assert_eq!(
            url_password("postgres://u:p%40ss@h:5/db?x=1"),
            vec!["p%40ss".to_owned(), "p@ss".to_owned()]
        );
        assert_eq!(
            url_password("postgres://h/db?password=a%2Fb"),
            vec!["a%2Fb".to_owned(), "a/b".to_owned()]
        );
        assert_eq!(
            url_password("host=h password='it\\'s'"),
            vec!["'it\\'s'".to_owned(), "it's".to_owned()]
        );
        assert!(url_password("postgres://u@h/db").is_empty());
        assert!(url_password("postgres://h/db").is_empty());
        assert!(url_password("postgres://u:@h/db").is_empty());
        let scrubbed = scrub(
            "password authentication failed: it's wrong ('it\\'s')",
            &url_password("host=h password='it\\'s'"),
        );
        assert!(
            !scrubbed.contains("it's") && !scrubbed.contains("it\\'s"),
            "{scrubbed}"
        );
    }
}
