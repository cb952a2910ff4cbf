//! Text every layer writes the same way.

use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// `at` as RFC 3339 in UTC (`2026-12-07T05:10:39.5Z`), as every time flowgate writes for people
/// and programs (reports, the audit log, the command line, messages) is written.
///
/// ```
/// use time::macros::datetime;
/// let at = datetime!(2026-12-07 06:10:39.5 +01:00);
/// assert_eq!(flowgate_domain::text::rfc3339(at), "2026-12-07T05:10:39.5Z");
/// ```
pub fn rfc3339(at: OffsetDateTime) -> String {
    let utc = at.to_offset(UtcOffset::UTC);
    // Only a year beyond four digits fails to format; the catalog and the stores hold none.
    utc.format(&Rfc3339).unwrap_or_else(|_| utc.to_string())
}

/// The JSON kind of `value` as a message names it: `null`, `boolean`, `number`, `string`,
/// `array` or `object`.
pub fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The first `chars` characters of `value`, with `…` when cut: how a message quotes an
/// offending value without repeating all of it.
///
/// ```
/// assert_eq!(flowgate_domain::text::shorten("abcdef", 3), "abc…");
/// assert_eq!(flowgate_domain::text::shorten("abc", 3), "abc");
/// ```
pub fn shorten(value: &str, chars: usize) -> String {
    match value.char_indices().nth(chars) {
        Some((end, _)) => format!("{}…", &value[..end]),
        None => value.to_owned(),
    }
}
