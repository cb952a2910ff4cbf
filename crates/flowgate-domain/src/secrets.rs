//! Secrets in connection URLs and strings, found in one place for every adapter (D25): the
//! PostgreSQL store, Redis, NATS JetStream and the binary show a URL with [`redact_url`] and
//! scrub an error message that might quote one with [`Secrets`].
//!
//! The rules are the strictest any of them needs:
//!
//! - a URL's user information: the password (`scheme://user:secret@host`, between the first
//!   `:` and the last `@` of the authority: a password may hold `@` unencoded, a host cannot),
//!   and the whole of it when it has no `:` (`nats://token@host`: NATS takes a token alone; a
//!   user name alone is hidden with it);
//! - the values of the query parameters `password`, `sslpassword` (libpq) and `pass` (redis-rs
//!   on a Unix socket), names compared without case and percent-decoded;
//! - the same keywords in a libpq key=value string (`host=h password=secret`, `password = 'it''s'`,
//!   libpq's quoting);
//! - every server of a comma-separated list (`nats://a:x@h1,nats://b:y@h2`; a PostgreSQL
//!   multi-host authority `u:x@h1,h2` is one URL).
//!
//! Each secret is also known percent-decoded (in a URL) or unquoted (key=value), the forms an
//! error message might quote. [`Secrets`] scrubs passwords and parameters only: user
//! information without a `:` is hidden in a shown URL, but a user name (`postgres`) scrubbed
//! from every message would hide the rest of it.

use std::ops::Range;

use percent_encoding::percent_decode_str;

/// The keywords whose values are secrets.
const SECRET_KEYWORDS: [&str; 3] = ["password", "sslpassword", "pass"];

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

/// The secrets of one URL or connection string, as written and decoded, to scrub from the text
/// of errors. Its `Debug` shows how many, never them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(Vec<String>);

impl Secrets {
    /// The secrets of `url` (see the module's rules).
    pub fn of(url: &str) -> Secrets {
        let mut found = Vec::new();
        for (span, decoded) in secret_spans(url)
            .into_iter()
            .filter(|(span, _)| !is_bare_user(url, span))
        {
            found.push(url[span].to_owned());
            found.push(decoded);
        }
        found.retain(|s| !s.is_empty());
        found.sort();
        found.dedup();
        // Longest first, so a secret that contains another is replaced whole.
        found.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Secrets(found)
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `message` with every secret replaced by `***`.
    pub fn scrub(&self, message: &str) -> String {
        self.0
            .iter()
            .fold(message.to_owned(), |m, s| m.replace(s.as_str(), "***"))
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} redacted)", self.0.len())
    }
}

/// Whether `span` of `text` is user information without a `:` (a token or a user name).
fn is_bare_user(text: &str, span: &Range<usize>) -> bool {
    text[..span.start].ends_with("://") && text[span.end..].starts_with('@')
}

/// Where each secret is, with its decoded value.
fn secret_spans(text: &str) -> Vec<(Range<usize>, String)> {
    let is_url = text
        .find("://")
        .is_some_and(|i| !text[..i].contains(char::is_whitespace));
    if !is_url {
        return keyword_secrets(text);
    }
    // One URL per server of a list: a piece without a scheme continues the URL before it
    // (a PostgreSQL multi-host authority, or a comma in a path or query).
    let mut found = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for piece in text.split(',') {
        let end = at + piece.len();
        let next_is_url = text[end..]
            .strip_prefix(',')
            .is_some_and(|rest| rest.split(',').next().is_some_and(|p| p.contains("://")));
        if end == text.len() || next_is_url {
            found.extend(url_secrets(text, start, end));
            start = end + 1;
        }
        at = end + 1;
    }
    found
}

/// The secrets of the URL `text[start..end]`.
fn url_secrets(text: &str, start: usize, end: usize) -> Vec<(Range<usize>, String)> {
    let decode = |raw: &str| percent_decode_str(raw).decode_utf8_lossy().into_owned();
    let mut found = Vec::new();
    let Some(scheme) = text[start..end].find("://") else {
        return found;
    };
    let authority_start = start + scheme + 3;
    let rest = &text[authority_start..end];
    let authority_end = authority_start + rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &text[authority_start..authority_end];
    if let Some(at) = authority.rfind('@') {
        let span = match authority[..at].find(':') {
            Some(colon) => authority_start + colon + 1..authority_start + at,
            // No `:`: a token (NATS), or a user name hidden with it.
            None => authority_start..authority_start + at,
        };
        if !span.is_empty() {
            found.push((span.clone(), decode(&text[span])));
        }
    }
    if let Some(q) = text[authority_end..end].find('?') {
        let query_start = authority_end + q + 1;
        let query_end = text[query_start..end]
            .find('#')
            .map_or(end, |h| query_start + h);
        let mut at = query_start;
        for pair in text[query_start..query_end].split('&') {
            if let Some(eq) = pair.find('=') {
                let key = decode(&pair[..eq]);
                let span = at + eq + 1..at + pair.len();
                if is_secret_keyword(&key) && !span.is_empty() {
                    found.push((span.clone(), decode(&text[span])));
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
    fn user_information_is_redacted_a_password_or_a_token() {
        let cases = [
            (
                "postgres://fg:s3cret@db:5432/fg?sslmode=require",
                "postgres://fg:***@db:5432/fg?sslmode=require",
            ),
            ("postgres://fg:p@ss@db/fg", "postgres://fg:***@db/fg"),
            (
                "redis://user:secret@host:6379/2",
                "redis://user:***@host:6379/2",
            ),
            (
                "redis://:secret@10.0.0.1:6379",
                "redis://:***@10.0.0.1:6379",
            ),
            ("redis://u:p@ss:w@host/0", "redis://u:***@host/0"),
            ("redis://u:s%40cret@host", "redis://u:***@host"),
            // No `:`: a NATS token, or a user name hidden with it (the strictest rule).
            ("nats://s3cr3t@127.0.0.1:4222", "nats://***@127.0.0.1:4222"),
            ("postgres://fg@db:5432/fg", "postgres://***@db:5432/fg"),
        ];
        for (url, redacted) in cases {
            assert_eq!(redact_url(url), redacted, "{url}");
        }
        for plain in [
            "postgres://db/fg?user=a:b@c",
            "sqlite://data/x.db",
            "nats://127.0.0.1:4222",
            "redis://host/?passport=x",
            "host=db user=fg dbname=fg",
            "not a url",
            "",
        ] {
            assert_eq!(redact_url(plain), plain);
        }
    }

    #[test]
    fn secret_parameters_of_a_query_are_redacted() {
        let cases = [
            (
                "postgres://host/db?user=u&password=s3cret",
                "postgres://host/db?user=u&password=***",
            ),
            (
                "postgresql://h/db?sslpassword=k3y&sslmode=verify-full&password=p%40ss",
                "postgresql://h/db?sslpassword=***&sslmode=verify-full&password=***",
            ),
            // Both forms at once, and an encoded parameter name.
            (
                "postgres://u:one@h/db?pass%77ord=two",
                "postgres://u:***@h/db?pass%77ord=***",
            ),
            ("postgres://h/db?password=", "postgres://h/db?password="),
            (
                "redis+unix:///run/redis.sock?db=1&pass=secret",
                "redis+unix:///run/redis.sock?db=1&pass=***",
            ),
            (
                "redis://host/?PASSWORD=secret&protocol=resp3",
                "redis://host/?PASSWORD=***&protocol=resp3",
            ),
        ];
        for (url, redacted) in cases {
            assert_eq!(redact_url(url), redacted, "{url}");
        }
    }

    #[test]
    fn every_server_of_a_list_is_redacted() {
        assert_eq!(
            redact_url("nats://a:one@h1:4222,nats://tok@h2:4222,nats://h3:4222"),
            "nats://a:***@h1:4222,nats://***@h2:4222,nats://h3:4222"
        );
        // A PostgreSQL multi-host URL is one URL, its query after the last host.
        assert_eq!(
            redact_url("postgres://u:pw@h1:5432,h2:5432/db?password=x&sslmode=require"),
            "postgres://u:***@h1:5432,h2:5432/db?password=***&sslmode=require"
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
    fn every_secret_is_found_raw_and_decoded_and_scrubbed() {
        assert_eq!(
            Secrets::of("postgres://u:p%40ss@h:5/db?x=1"),
            Secrets(vec!["p%40ss".to_owned(), "p@ss".to_owned()])
        );
        assert_eq!(
            Secrets::of("host=h password='it\\'s'"),
            Secrets(vec!["'it\\'s'".to_owned(), "it's".to_owned()])
        );
        assert!(Secrets::of("postgres://h/db").is_empty());
        assert!(Secrets::of("postgres://u:@h/db").is_empty());
        // A user name alone is hidden in the URL shown, but not scrubbed from messages.
        assert!(Secrets::of("postgres://postgres@h/db").is_empty());
        let secrets = Secrets::of("redis://u:s%40cret@host?pass=other");
        assert_eq!(
            secrets.scrub("auth as u with s@cret, s%40cret, other failed"),
            "auth as u with ***, ***, *** failed"
        );
        let debug = format!("{secrets:?}");
        assert!(
            !debug.contains("s@c") && !debug.contains("other"),
            "{debug}"
        );
        assert_eq!(Secrets::of("redis://host").scrub("kept"), "kept");
    }
}
