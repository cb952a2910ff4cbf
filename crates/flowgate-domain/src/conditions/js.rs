//! JavaScript value semantics that GrowthBook's evaluator relies on.
//!
//! GrowthBook's reference SDK is written in JavaScript and leans on the language's coercions
//! (`value + ""`, `value * 1`, `<` between a string and a number, truthiness). D4 adopts those
//! semantics, so this module reproduces them for JSON values: every function here names the
//! JavaScript operation it stands for.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::Value;

/// The `null` that a missing attribute reads as (GrowthBook's `getPath` returns `null`).
pub(crate) static NULL: Value = Value::Null;

/// Nesting below which array joins and structural comparisons stop, so that a value built in
/// code (not parsed, where serde_json already caps depth) cannot overflow the stack.
const MAX_VALUE_DEPTH: usize = 256;

/// The JavaScript number of a JSON number. JavaScript holds every number as an `f64`, so
/// integers beyond 2^53 are rounded exactly as `JSON.parse` would round them.
pub(crate) fn number_value(n: &serde_json::Number) -> f64 {
    n.as_f64().unwrap_or(f64::NAN)
}

/// `Number.prototype.toString()` (radix 10), the shortest round-trip form laid out as
/// ECMAScript's `Number::toString` prescribes (`1e+21`, `1.5e-7`, `0.000001`, `-0` → `0`).
pub(crate) fn number_to_string(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    let mut out = String::new();
    if x < 0.0 {
        out.push('-');
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, which is what ECMAScript asks
    // for; only the layout differs, so take the digits and the exponent and lay them out anew.
    let mut sci = format!("{:e}", x.abs());
    // When two digit strings of the shortest length both round-trip and lie equally close to
    // the value, JavaScript engines take the even one; Rust's shortest formatter may not. The
    // correctly rounded form of that length (ties to even) settles it whenever it round-trips.
    // Ties need at least 16 digits, so shorter results skip the extra work.
    let shortest_len = sci
        .split('e')
        .next()
        .map_or(0, |m| m.replace('.', "").len());
    if shortest_len >= 15 {
        let rounded = format!("{:.*e}", shortest_len - 1, x.abs());
        if rounded.parse::<f64>().ok() == Some(x.abs()) {
            sci = rounded;
        }
    }
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let k = digits.len() as i64;
    let n = exponent + 1;
    let zeros = |count: i64| std::iter::repeat_n('0', usize::try_from(count).unwrap_or(0));
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(zeros(n - k));
    } else if 0 < n && n <= 21 {
        let split = usize::try_from(n)
            .ok()
            .and_then(|n| digits.split_at_checked(n));
        let (int, frac) = split.unwrap_or((digits.as_str(), ""));
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(zeros(-n));
        out.push_str(&digits);
    } else {
        let (first, rest) = digits.split_at_checked(1).unwrap_or((digits.as_str(), ""));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if n - 1 < 0 { '-' } else { '+' });
        out.push_str(&(n - 1).abs().to_string());
    }
    out
}

/// JavaScript's `WhiteSpace` and `LineTerminator` code points, which `Number("…")` trims.
pub(crate) fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// `Number(string)`: ECMAScript's `StringToNumber`. Empty or blank is 0, `Infinity` is
/// accepted, `0x`/`0o`/`0b` prefixes are integers, anything else must be a plain decimal
/// literal (no `_`, no `inf`/`nan` spellings that Rust's parser would accept) or it is NaN.
pub(crate) fn string_to_number(s: &str) -> f64 {
    let t = s.trim_matches(is_js_whitespace);
    if t.is_empty() {
        return 0.0;
    }
    match t {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    let bytes = t.as_bytes();
    let radix_bits = match bytes {
        [b'0', b'x' | b'X', _, ..] => Some(4),
        [b'0', b'o' | b'O', _, ..] => Some(3),
        [b'0', b'b' | b'B', _, ..] => Some(1),
        _ => None,
    };
    if let Some(bits) = radix_bits {
        // The prefix is two ASCII bytes, so byte 2 starts a character.
        return radix_to_number(t.get(2..).unwrap_or(""), bits);
    }
    if !is_decimal_literal(bytes) {
        return f64::NAN;
    }
    t.parse::<f64>().unwrap_or(f64::NAN)
}

/// `StrUnsignedDecimalLiteral` with an optional sign: digits with an optional fraction (at
/// least one digit in all), then an optional exponent.
fn is_decimal_literal(b: &[u8]) -> bool {
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut digits = i - int_start;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let frac_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        digits += i - frac_start;
    }
    if digits == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == b.len()
}

/// A binary, octal or hexadecimal integer literal, correctly rounded to `f64` like
/// JavaScript: the top bits are kept exactly in a `u128`, the rest only as a sticky bit that
/// decides ties.
fn radix_to_number(digits: &str, bits: u32) -> f64 {
    let radix = 1u32 << bits;
    let mut acc: u128 = 0;
    let mut shift: i32 = 0;
    let mut sticky = false;
    for c in digits.chars() {
        let Some(d) = c.to_digit(radix) else {
            return f64::NAN;
        };
        if acc >> (128 - bits) != 0 {
            shift = shift.saturating_add(bits as i32);
            sticky |= d != 0;
        } else {
            acc = (acc << bits) | u128::from(d);
        }
    }
    let mantissa = (acc | u128::from(sticky)) as f64;
    if shift == 0 {
        mantissa
    } else {
        mantissa * 2f64.powi(shift)
    }
}

/// `ToString(value)` (what `value + ""` and `String(value)` produce) for a JSON value.
/// Strings are borrowed, everything else is formatted: arrays as `Array.prototype.join`,
/// objects as `[object Object]`.
pub(crate) fn to_js_string(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s),
        Value::Null => Cow::Borrowed("null"),
        Value::Bool(true) => Cow::Borrowed("true"),
        Value::Bool(false) => Cow::Borrowed("false"),
        Value::Number(n) => Cow::Owned(number_to_string(number_value(n))),
        Value::Object(_) => Cow::Borrowed("[object Object]"),
        Value::Array(items) => {
            let mut out = String::new();
            join_into(items, &mut out, 0);
            Cow::Owned(out)
        }
    }
}

/// `Array.prototype.join(",")`: `null` elements become empty strings, nested arrays join
/// recursively.
fn join_into(items: &[Value], out: &mut String, depth: usize) {
    if depth > MAX_VALUE_DEPTH {
        return;
    }
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match item {
            Value::Null => {}
            Value::Array(inner) => join_into(inner, out, depth + 1),
            other => out.push_str(&to_js_string(other)),
        }
    }
}

/// `ToNumber(value)`, as in `value * 1`.
pub(crate) fn to_number(v: &Value) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => number_value(n),
        Value::String(s) => string_to_number(s),
        Value::Array(_) => string_to_number(&to_js_string(v)),
        Value::Object(_) => f64::NAN,
    }
}

/// `ToBoolean(value)` (`!!value`).
pub(crate) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => {
            let x = number_value(n);
            x != 0.0 && !x.is_nan()
        }
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// `String.prototype.toLowerCase()`. Rust's `to_lowercase` applies the same full Unicode
/// mapping, final sigma included; the ASCII fast path avoids allocating for values that are
/// already lower case.
pub(crate) fn js_lowercase(s: &str) -> Cow<'_, str> {
    if s.is_ascii() && !s.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.to_lowercase())
    }
}

/// Orders two strings as JavaScript does: by UTF-16 code units, which differs from Rust's
/// code point order when a supplementary character meets one in `U+E000..=U+FFFF`.
pub(crate) fn js_cmp_str(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        a.cmp(b)
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

/// A primitive after `ToPrimitive(value, number)`, the first step of JavaScript's relational
/// comparison.
#[derive(Clone, Debug)]
pub(crate) enum Primitive<'a> {
    /// A string primitive; relational comparison between two strings is by code units.
    Str(Cow<'a, str>),
    /// Anything that is not a string compares as a number.
    Num(f64),
}

impl Primitive<'_> {
    /// `ToNumber` of the primitive.
    fn number(&self) -> f64 {
        match self {
            Primitive::Str(s) => string_to_number(s),
            Primitive::Num(x) => *x,
        }
    }
}

/// `ToPrimitive(value, number)` for a JSON value: arrays and objects become their string form,
/// `null` and booleans their numbers.
pub(crate) fn to_primitive(v: &Value) -> Primitive<'_> {
    match v {
        Value::String(s) => Primitive::Str(Cow::Borrowed(s)),
        Value::Number(n) => Primitive::Num(number_value(n)),
        Value::Null => Primitive::Num(0.0),
        Value::Bool(b) => Primitive::Num(f64::from(u8::from(*b))),
        Value::Array(_) | Value::Object(_) => Primitive::Str(to_js_string(v)),
    }
}

/// JavaScript's abstract relational comparison (`IsLessThan`) expressed as an ordering:
/// `None` stands for `undefined` (a NaN was involved), which makes `<`, `<=`, `>` and `>=`
/// all false.
pub(crate) fn js_compare(a: &Primitive<'_>, b: &Primitive<'_>) -> Option<Ordering> {
    match (a, b) {
        (Primitive::Str(x), Primitive::Str(y)) => Some(js_cmp_str(x, y)),
        _ => a.number().partial_cmp(&b.number()),
    }
}

/// Strict equality (`===`) of two JSON values from different documents. Arrays and objects
/// compare by identity in JavaScript, and an attribute is never the same object as a
/// condition operand, so they are never equal.
pub(crate) fn strict_equals(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => number_value(x) == number_value(y),
        (Value::String(x), Value::String(y)) => x == y,
        _ => false,
    }
}

/// `JSON.stringify(a) === JSON.stringify(b)`, compared structurally so nothing is serialised.
///
/// Numbers compare as JavaScript numbers (`1.0` and `1` serialise alike, so do `-0` and `0`).
/// Objects compare as key sets: JavaScript would also require the same insertion order, but
/// `serde_json::Map` keeps keys sorted, so that order is not known here; no GrowthBook case
/// depends on it.
pub(crate) fn json_equals(a: &Value, b: &Value) -> bool {
    json_equals_at(a, b, 0)
}

fn json_equals_at(a: &Value, b: &Value, depth: usize) -> bool {
    if depth > MAX_VALUE_DEPTH {
        return false;
    }
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| json_equals_at(p, q, depth + 1))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kp, p), (kq, q))| kp == kq && json_equals_at(p, q, depth + 1))
        }
        _ => strict_equals(a, b),
    }
}

/// GrowthBook's `getType`: `typeof` plus `"array"` and `"null"`, which are JSON's kinds.
pub(crate) fn type_name(v: &Value) -> &'static str {
    crate::text::json_kind(v)
}

/// The canonical array index that a property key names (`"0"`, `"12"`, never `"01"`), as
/// JavaScript's `key in array` understands it.
pub(crate) fn array_index(key: &str) -> Option<usize> {
    let b = key.as_bytes();
    if b.is_empty() || b.len() > 10 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if b.len() > 1 && b.first() == Some(&b'0') {
        return None;
    }
    let n: u64 = key.parse().ok()?;
    // Array indices stop below 2^32 - 1.
    if n >= u64::from(u32::MAX) {
        return None;
    }
    usize::try_from(n).ok()
}

/// The input of GrowthBook's `paddedVersionString` reduced to the string it works on: numbers
/// become their JavaScript string, other non-strings and the empty string become `"0"`.
pub(crate) fn version_input(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) if !s.is_empty() => Cow::Borrowed(s),
        Value::Number(n) => Cow::Owned(number_to_string(number_value(n))),
        _ => Cow::Borrowed("0"),
    }
}

/// The UTF-16 code units of GrowthBook's `paddedVersionString(input)`, produced lazily so an
/// attribute's version can be compared without building the string.
///
/// The algorithm: drop one leading `v` and the build suffix from `+`; split on `-` and `.`;
/// append a `~` part when there are exactly three parts (so a release sorts after its
/// pre-releases); left-pad all-digit parts with spaces to five; join with `-`.
pub(crate) fn padded_version_units(input: &str) -> impl Iterator<Item = u16> + '_ {
    let core = version_core(input);
    let is_sep = |c: char| c == '-' || c == '.';
    let parts = core.split(is_sep).count();
    let tilde_len = if parts == 3 { 2 } else { 0 };
    core.split(is_sep)
        .enumerate()
        .flat_map(|(i, part)| {
            let sep = (i > 0).then_some(u16::from(b'-'));
            let pad = if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
                5usize.saturating_sub(part.len())
            } else {
                0
            };
            sep.into_iter()
                .chain(std::iter::repeat_n(u16::from(b' '), pad))
                .chain(part.encode_utf16())
        })
        .chain(
            [u16::from(b'-'), u16::from(b'~')]
                .into_iter()
                .take(tilde_len),
        )
}

/// `input.replace(/(^v|\+.*$)/g, "")`. Since `.` stops at line terminators and `$` is the end
/// of input, the build suffix starts at the first `+` after the last line terminator.
fn version_core(input: &str) -> &str {
    let s = input.strip_prefix('v').unwrap_or(input);
    let tail_start = s
        .char_indices()
        .rev()
        .find(|(_, c)| matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    match s.get(tail_start..).and_then(|tail| tail.find('+')) {
        Some(plus) => s.get(..tail_start + plus).unwrap_or(s),
        None => s,
    }
}

/// `paddedVersionString(input)` collected, for operands that are padded once at compile time.
pub(crate) fn padded_version(v: &Value) -> Box<[u16]> {
    padded_version_units(&version_input(v)).collect()
}
