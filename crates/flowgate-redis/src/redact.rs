//! The password of a Redis URL, kept out of every message and log: [`redact_url`] for showing a
//! URL, [`Secrets`] for scrubbing the text of an error that might quote it.
//!
//! redis-rs reads a password from two places: the user information of a TCP URL
//! (`redis://user:secret@host:6379`, percent-encoded) and the `pass` query parameter of a Unix
//! socket URL (`redis+unix:///run/redis.sock?pass=secret`). Both are covered, and `password`
//! too, in case an operator writes that.

/// Query parameters whose values are secrets.
const SECRET_PARAMS: [&str; 2] = ["pass", "password"];

/// The URL with every password replaced by `***`, for logs and error messages; a URL without
/// one comes back as it is. A user name alone is not a secret and is kept.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    let mut spans = secret_spans(url);
    // Replace from the end, so earlier spans keep their offsets.
    spans.sort_by_key(|span| std::cmp::Reverse(span.start));
    for span in spans {
        out.replace_range(span, "***");
    }
    out
}

/// The secrets of one URL, as written and percent-decoded (the forms an error message might
/// quote), to scrub from error texts.
#[derive(Clone, Default)]
pub(crate) struct Secrets(Vec<String>);

impl Secrets {
    pub(crate) fn of(url: &str) -> Secrets {
        let mut found: Vec<String> = secret_spans(url)
            .into_iter()
            .flat_map(|span| {
                let raw = &url[span];
                [raw.to_owned(), percent_decode(raw)]
            })
            .filter(|s| !s.is_empty())
            .collect();
        found.sort();
        found.dedup();
        // Longest first, so a secret that contains another is replaced whole.
        found.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Secrets(found)
    }

    /// `message` with every secret replaced by `***`.
    pub(crate) fn scrub(&self, message: &str) -> String {
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

/// Where the secrets of `url` are: the password of the user information (between the first `:`
/// and the last `@` of the authority: a password may hold an unencoded `@`, a host cannot) and
/// the values of the secret query parameters.
fn secret_spans(url: &str) -> Vec<std::ops::Range<usize>> {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return Vec::new();
    };
    let mut spans = Vec::new();
    let rest = &url[start..];
    let authority_end = start + rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &url[start..authority_end];
    if let Some(at) = authority.rfind('@') {
        if let Some(colon) = authority[..at].find(':') {
            let span = start + colon + 1..start + at;
            if !span.is_empty() {
                spans.push(span);
            }
        }
    }
    if let Some(q) = url[authority_end..].find('?') {
        let query_start = authority_end + q + 1;
        let query_end = url[query_start..]
            .find('#')
            .map_or(url.len(), |i| query_start + i);
        let mut offset = query_start;
        for pair in url[query_start..query_end].split('&') {
            if let Some((name, value)) = pair.split_once('=') {
                if SECRET_PARAMS.contains(&name) && !value.is_empty() {
                    let value_start = offset + name.len() + 1;
                    spans.push(value_start..value_start + value.len());
                }
            }
            offset += pair.len() + 1;
        }
    }
    spans
}

/// `%XX` escapes decoded (invalid ones kept as written); not UTF-8 after decoding: lossy.
fn percent_decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match decoded {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_replaced_and_the_rest_is_kept() {
        let cases = [
            ("redis://user:secret@host", "redis://user:***@host"),
            (
                "redis://user:secret@host:6379/2",
                "redis://user:***@host:6379/2",
            ),
            (
                "redis://:secret@10.0.0.1:6379",
                "redis://:***@10.0.0.1:6379",
            ),
            // A password may hold `@` and `:` unencoded; the host cannot.
            ("redis://u:p@ss:w@host/0", "redis://u:***@host/0"),
            ("redis://u:s%40cret@host", "redis://u:***@host"),
            (
                "redis+unix:///run/redis.sock?db=1&pass=secret",
                "redis+unix:///run/redis.sock?db=1&pass=***",
            ),
            (
                "redis://host/?password=secret&protocol=resp3",
                "redis://host/?password=***&protocol=resp3",
            ),
            // Nothing secret: unchanged.
            ("redis://user@host:6379", "redis://user@host:6379"),
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://host/?passport=x", "redis://host/?passport=x"),
            ("not a url", "not a url"),
            ("", ""),
        ];
        for (url, redacted) in cases {
            assert_eq!(redact_url(url), redacted, "{url}");
        }
    }

    #[test]
    fn scrubbing_finds_raw_and_decoded_passwords() {
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
