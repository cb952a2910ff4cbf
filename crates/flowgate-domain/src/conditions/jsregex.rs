//! JavaScript regular expressions on the `regex` crate's linear-time engine (D4).
//!
//! GrowthBook runs `$regex` through `new RegExp(pattern)` (flag `i` for `$regexi`): a
//! JavaScript pattern without the `u` flag, with the web-compatibility grammar of ECMAScript
//! Annex B, matched against the UTF-16 code units of `String(value)`. Handing such a pattern
//! to the `regex` crate as it is would change its meaning (`\d` and `\w` are Unicode-aware
//! there, `.` matches `\r`, `\u{41}` is a code point rather than 41 `u`s, `[]` is a syntax
//! error, case folding differs), so this module parses the JavaScript grammar itself and
//! writes an equivalent pattern out of explicit character sets.
//!
//! Two things make the translation exact:
//!
//! * Matching works on UTF-16 code units. A haystack with supplementary characters is
//!   rewritten so that each surrogate becomes one private-use character
//!   (`U+100000 + (unit - 0xD800)`), and the pattern refers to surrogates the same way, so a
//!   `.` matches half a pair exactly as in JavaScript.
//! * Case-insensitive matching uses JavaScript's `Canonicalize` (simple upper-casing that never
//!   maps a non-ASCII character to ASCII): each literal and class is widened to every unit with
//!   the same canonical form, instead of using the `regex` crate's own case folding.
//!
//! Back-references and look-around have no linear-time equivalent; they are reported as
//! unsupported, and D4 rejects them at import.

use std::sync::OnceLock;

use regex_automata::meta;
use regex_automata::nfa::thompson::WhichCaptures;

/// Why a pattern cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PatternError {
    /// JavaScript itself rejects the pattern (`new RegExp` throws), so GrowthBook evaluates
    /// the operator to false.
    Invalid(String),
    /// JavaScript accepts the pattern but the linear-time engine cannot run it (D4).
    Unsupported(String),
}

/// A compiled `$regex` / `$regexi` pattern. Clones share the compiled program.
#[derive(Clone, Debug)]
pub(crate) struct JsRegex {
    regex: meta::Regex,
}

/// The engine configuration: conditions only ask whether a pattern matches, so no capture
/// states are compiled, and no fully compiled DFA is built ahead of time (it cost ~7 KB per
/// pattern, and the lazy DFA, built while matching, is as fast on attribute-sized
/// haystacks). Whatever else enables `regex-automata`'s `dfa-build` feature in the build
/// (feature unification), patterns stay this size.
fn engine() -> meta::Config {
    meta::Config::new()
        .which_captures(WhichCaptures::None)
        .dfa(false)
}

/// Deepest group nesting accepted, far beyond what an audience rule needs; it keeps the
/// recursive parser's stack use small.
const MAX_GROUP_DEPTH: usize = 64;

/// First private-use code point that stands for a UTF-16 surrogate unit.
const SURROGATE_BASE: u32 = 0x10_0000;

impl JsRegex {
    /// Translates and compiles a JavaScript pattern (`ignore_case` is the `i` flag).
    pub(crate) fn new(pattern: &str, ignore_case: bool) -> Result<Self, PatternError> {
        let translated = translate(pattern, ignore_case)?;
        meta::Regex::builder()
            .configure(engine())
            .build(&translated)
            .map(|regex| JsRegex { regex })
            .map_err(|e| {
                PatternError::Unsupported(format!(
                    "the linear-time regex engine cannot compile it ({})",
                    first_line(&e.to_string())
                ))
            })
    }

    /// `RegExp.prototype.test(haystack)`.
    pub(crate) fn test(&self, haystack: &str) -> bool {
        // Only supplementary characters (four UTF-8 bytes, lead byte 0xF0 and above) are more
        // than one UTF-16 unit; without them the haystack is already unit per character.
        if haystack.bytes().any(|b| b >= 0xF0) {
            self.regex.is_match(&to_unit_chars(haystack))
        } else {
            self.regex.is_match(haystack)
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim()
}

/// Rewrites supplementary characters as two surrogate stand-ins.
fn to_unit_chars(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        let mut buf = [0u16; 2];
        for unit in c.encode_utf16(&mut buf) {
            out.push(unit_char(*unit));
        }
    }
    out
}

/// The character that stands for a UTF-16 code unit in translated patterns and haystacks.
fn unit_char(unit: u16) -> char {
    let u = u32::from(unit);
    if (0xD800..=0xDFFF).contains(&u) {
        char::from_u32(SURROGATE_BASE + (u - 0xD800)).unwrap_or('\u{FFFD}')
    } else {
        char::from_u32(u).unwrap_or('\u{FFFD}')
    }
}

/// A set of UTF-16 code units as sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct UnitSet {
    ranges: Vec<(u16, u16)>,
}

impl UnitSet {
    fn single(u: u16) -> Self {
        UnitSet {
            ranges: vec![(u, u)],
        }
    }

    fn from_ranges(ranges: &[(u16, u16)]) -> Self {
        let mut set = UnitSet::default();
        for &(lo, hi) in ranges {
            set.add_range(lo, hi);
        }
        set
    }

    fn add_range(&mut self, lo: u16, hi: u16) {
        self.ranges.push((lo, hi));
        self.normalize();
    }

    fn add_set(&mut self, other: &UnitSet) {
        self.ranges.extend_from_slice(&other.ranges);
        self.normalize();
    }

    fn normalize(&mut self) {
        self.ranges.sort_unstable();
        let mut merged: Vec<(u16, u16)> = Vec::with_capacity(self.ranges.len());
        for &(lo, hi) in &self.ranges {
            match merged.last_mut() {
                Some(last) if u32::from(lo) <= u32::from(last.1) + 1 => {
                    last.1 = last.1.max(hi);
                }
                _ => merged.push((lo, hi)),
            }
        }
        self.ranges = merged;
    }

    fn contains(&self, u: u16) -> bool {
        self.ranges
            .binary_search_by(|&(lo, hi)| {
                if hi < u {
                    std::cmp::Ordering::Less
                } else if lo > u {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }

    fn complement(&self) -> Self {
        let mut out = Vec::with_capacity(self.ranges.len() + 1);
        let mut next: u32 = 0;
        for &(lo, hi) in &self.ranges {
            if u32::from(lo) > next {
                out.push((next as u16, lo - 1));
            }
            next = u32::from(hi) + 1;
        }
        if next <= 0xFFFF {
            out.push((next as u16, 0xFFFF));
        }
        UnitSet { ranges: out }
    }

    /// Every unit whose JavaScript `Canonicalize` equals that of a member: what a class or
    /// literal matches under the `i` flag.
    fn case_closure(&self) -> Self {
        let table = fold_table();
        let mut out = self.clone();
        let mut extra = Vec::new();
        for &(member, canon) in &table.by_member {
            if self.contains(member) {
                let start = table.by_canon.partition_point(|&(c, _)| c < canon);
                for &(c, m) in table.by_canon.get(start..).unwrap_or(&[]) {
                    if c != canon {
                        break;
                    }
                    extra.push((m, m));
                }
            }
        }
        if !extra.is_empty() {
            out.ranges.extend(extra);
            out.normalize();
        }
        out
    }
}

/// Members of the non-trivial case-equivalence classes of the BMP under JavaScript's
/// non-Unicode `Canonicalize`, computed once.
struct FoldTable {
    /// `(member, canonical)`, sorted by member.
    by_member: Vec<(u16, u16)>,
    /// `(canonical, member)`, sorted by canonical.
    by_canon: Vec<(u16, u16)>,
}

fn fold_table() -> &'static FoldTable {
    static TABLE: OnceLock<FoldTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut pairs: Vec<(u16, u16)> = (0u16..=0xFFFF)
            .filter_map(|u| Some((canonicalize(u)?, u)))
            .collect();
        pairs.sort_unstable();
        // Keep only classes with more than one member.
        let by_canon: Vec<(u16, u16)> = pairs
            .chunk_by(|a, b| a.0 == b.0)
            .filter(|class| class.len() > 1)
            .flatten()
            .copied()
            .collect();
        let mut by_member: Vec<(u16, u16)> = by_canon.iter().map(|&(c, m)| (m, c)).collect();
        by_member.sort_unstable();
        FoldTable {
            by_member,
            by_canon,
        }
    })
}

/// ECMAScript `Canonicalize(ch)` without the `u` flag: the upper case of the unit when that is
/// a single unit, unless it would map a non-ASCII unit to ASCII. `None` for surrogates, which
/// only ever match themselves.
fn canonicalize(u: u16) -> Option<u16> {
    let c = char::from_u32(u32::from(u))?;
    let mut upper = c.to_uppercase();
    let (Some(first), None) = (upper.next(), upper.next()) else {
        return Some(u);
    };
    let Ok(cu) = u16::try_from(u32::from(first)) else {
        return Some(u);
    };
    if u >= 128 && cu < 128 {
        return Some(u);
    }
    Some(cu)
}

const DIGITS: &[(u16, u16)] = &[(0x30, 0x39)];
const WORD: &[(u16, u16)] = &[(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)];
const SPACE: &[(u16, u16)] = &[
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
];
const LINE_TERMINATORS: &[(u16, u16)] = &[(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)];

/// One class atom: a single unit (which may start a range) or a class escape such as `\d`.
enum ClassAtom {
    Unit(u16),
    Set(UnitSet),
}

/// Translates a JavaScript pattern into an equivalent `regex` crate pattern.
fn translate(pattern: &str, ignore_case: bool) -> Result<String, PatternError> {
    let src: Vec<u16> = pattern.encode_utf16().collect();
    let (ncap, group_names) = prescan(&src);
    let mut t = Translator {
        src: &src,
        pos: 0,
        ncap,
        has_named: !group_names.is_empty(),
        group_names,
        seen_names: Vec::new(),
        ignore_case,
        out: String::with_capacity(pattern.len() * 2),
        depth: 0,
    };
    t.disjunction()?;
    if t.pos < src.len() {
        return Err(PatternError::Invalid("unmatched ')'".to_owned()));
    }
    Ok(t.out)
}

/// Counts capturing groups and collects group names, which decide how `\1` and `\k` parse.
fn prescan(src: &[u16]) -> (usize, Vec<Vec<u16>>) {
    let mut ncap = 0;
    let mut names = Vec::new();
    let mut in_class = false;
    let mut i = 0;
    while let Some(&u) = src.get(i) {
        if u == u16::from(b'\\') {
            i += 2;
            continue;
        }
        if in_class {
            in_class = u != u16::from(b']');
        } else if u == u16::from(b'[') {
            in_class = true;
        } else if u == u16::from(b'(') {
            if src.get(i + 1) != Some(&u16::from(b'?')) {
                ncap += 1;
            } else if src.get(i + 2) == Some(&u16::from(b'<'))
                && !matches!(src.get(i + 3), Some(&c) if c == u16::from(b'=') || c == u16::from(b'!'))
            {
                ncap += 1;
                let start = i + 3;
                let end = src
                    .get(start..)
                    .unwrap_or(&[])
                    .iter()
                    .position(|&c| c == u16::from(b'>'))
                    .map_or(src.len(), |n| start + n);
                names.push(src.get(start..end).unwrap_or(&[]).to_vec());
            }
        }
        i += 1;
    }
    (ncap, names)
}

struct Translator<'a> {
    src: &'a [u16],
    pos: usize,
    ncap: usize,
    has_named: bool,
    group_names: Vec<Vec<u16>>,
    seen_names: Vec<Vec<u16>>,
    ignore_case: bool,
    out: String,
    depth: usize,
}

fn invalid<T>(msg: &str) -> Result<T, PatternError> {
    Err(PatternError::Invalid(msg.to_owned()))
}

fn unsupported<T>(msg: &str) -> Result<T, PatternError> {
    Err(PatternError::Unsupported(msg.to_owned()))
}

fn is(u: Option<u16>, c: u8) -> bool {
    u == Some(u16::from(c))
}

fn hex_value(u: u16) -> Option<u32> {
    char::from_u32(u32::from(u)).and_then(|c| c.to_digit(16))
}

impl Translator<'_> {
    fn peek(&self) -> Option<u16> {
        self.src.get(self.pos).copied()
    }

    fn peek_at(&self, n: usize) -> Option<u16> {
        self.src.get(self.pos + n).copied()
    }

    fn starts_with(&self, s: &str) -> bool {
        s.bytes().enumerate().all(|(i, b)| is(self.peek_at(i), b))
    }

    fn disjunction(&mut self) -> Result<(), PatternError> {
        loop {
            while let Some(u) = self.peek() {
                if u == u16::from(b'|') || u == u16::from(b')') {
                    break;
                }
                self.term()?;
            }
            if is(self.peek(), b'|') {
                self.pos += 1;
                self.out.push('|');
            } else {
                return Ok(());
            }
        }
    }

    fn term(&mut self) -> Result<(), PatternError> {
        let Some(u) = self.peek() else {
            return Ok(());
        };
        let Ok(c) = u8::try_from(u) else {
            self.pos += 1;
            self.literal(u);
            return self.quantifier();
        };
        match c {
            b'^' | b'$' => {
                self.pos += 1;
                self.out.push(char::from(c));
                self.no_quantifier()
            }
            b'\\' if matches!(self.peek_at(1), Some(n) if n == u16::from(b'b') || n == u16::from(b'B')) =>
            {
                let word = is(self.peek_at(1), b'b');
                self.pos += 2;
                self.out
                    .push_str(if word { r"(?-u:\b)" } else { r"(?-u:\B)" });
                self.no_quantifier()
            }
            b'(' => {
                self.group()?;
                self.quantifier()
            }
            b'[' => {
                self.pos += 1;
                let set = self.class()?;
                self.emit_set(&set);
                self.quantifier()
            }
            b'.' => {
                self.pos += 1;
                let set = UnitSet::from_ranges(LINE_TERMINATORS).complement();
                self.emit_set(&set);
                self.quantifier()
            }
            b'*' | b'+' | b'?' => invalid("nothing to repeat"),
            b'{' => {
                if self.braced_quantifier().is_some() {
                    return invalid("nothing to repeat");
                }
                self.pos += 1;
                self.literal(u);
                self.quantifier()
            }
            b'\\' => {
                self.atom_escape()?;
                self.quantifier()
            }
            _ => {
                self.pos += 1;
                self.literal(u);
                self.quantifier()
            }
        }
    }

    fn no_quantifier(&self) -> Result<(), PatternError> {
        match self.peek() {
            Some(u) if u == u16::from(b'*') || u == u16::from(b'+') || u == u16::from(b'?') => {
                invalid("nothing to repeat")
            }
            Some(u) if u == u16::from(b'{') && self.braced_quantifier().is_some() => {
                invalid("nothing to repeat")
            }
            _ => Ok(()),
        }
    }

    /// A `{n}`, `{n,}` or `{n,m}` at the current position: `(min, max, length)`.
    fn braced_quantifier(&self) -> Option<(u64, Option<u64>, usize)> {
        if !is(self.peek(), b'{') {
            return None;
        }
        let mut i = 1;
        let number = |i: &mut usize| -> Option<u64> {
            let start = *i;
            let mut v: u64 = 0;
            while let Some(d) = self
                .peek_at(*i)
                .and_then(|u| char::from_u32(u32::from(u)))
                .and_then(|c| c.to_digit(10))
            {
                v = v.saturating_mul(10).saturating_add(u64::from(d));
                *i += 1;
            }
            (*i > start).then_some(v)
        };
        let min = number(&mut i)?;
        let max = if is(self.peek_at(i), b',') {
            i += 1;
            number(&mut i)
        } else {
            Some(min)
        };
        is(self.peek_at(i), b'}').then_some((min, max, i + 1))
    }

    fn quantifier(&mut self) -> Result<(), PatternError> {
        let (min, max) = match self.peek().and_then(|u| u8::try_from(u).ok()) {
            Some(b'*') => {
                self.pos += 1;
                (0, None)
            }
            Some(b'+') => {
                self.pos += 1;
                (1, None)
            }
            Some(b'?') => {
                self.pos += 1;
                (0, Some(1))
            }
            Some(b'{') => match self.braced_quantifier() {
                Some((min, max, len)) => {
                    self.pos += len;
                    (min, max)
                }
                None => return Ok(()),
            },
            _ => return Ok(()),
        };
        // Lazy or greedy only changes which match is found, never whether one exists.
        if is(self.peek(), b'?') {
            self.pos += 1;
        }
        if let Some(max) = max {
            if min > max {
                return invalid("numbers out of order in {} quantifier");
            }
        }
        let limit = u64::from(u32::MAX);
        if min > limit || max.is_some_and(|m| m > limit) {
            return unsupported("a repetition count is too large for the regex engine");
        }
        match max {
            None => self.out.push_str(&format!("{{{min},}}")),
            Some(m) if m == min => self.out.push_str(&format!("{{{min}}}")),
            Some(m) => self.out.push_str(&format!("{{{min},{m}}}")),
        }
        Ok(())
    }

    fn group(&mut self) -> Result<(), PatternError> {
        if self.starts_with("(?=") || self.starts_with("(?!") {
            return unsupported(
                "look-ahead assertions are not supported by the linear-time engine",
            );
        }
        if self.starts_with("(?<=") || self.starts_with("(?<!") {
            return unsupported(
                "look-behind assertions are not supported by the linear-time engine",
            );
        }
        if self.starts_with("(?:") {
            self.pos += 3;
        } else if self.starts_with("(?<") {
            self.pos += 3;
            let start = self.pos;
            while self.peek().is_some_and(|u| u != u16::from(b'>')) {
                self.pos += 1;
            }
            if self.peek().is_none() {
                return invalid("invalid capture group name");
            }
            let name = self.src.get(start..self.pos).unwrap_or(&[]).to_vec();
            self.pos += 1;
            check_group_name(&name)?;
            if self.seen_names.contains(&name) {
                return unsupported("duplicate capture group names are not supported");
            }
            self.seen_names.push(name);
        } else if self.starts_with("(?") {
            return match self.peek_at(2).and_then(|u| u8::try_from(u).ok()) {
                Some(b'i' | b'm' | b's' | b'-') => {
                    unsupported("inline modifier groups are not supported")
                }
                _ => invalid("invalid group"),
            };
        } else {
            self.pos += 1;
        }
        self.depth += 1;
        if self.depth > MAX_GROUP_DEPTH {
            return unsupported("groups are nested too deeply");
        }
        self.out.push_str("(?:");
        self.disjunction()?;
        if !is(self.peek(), b')') {
            return invalid("unterminated group");
        }
        self.pos += 1;
        self.out.push(')');
        self.depth -= 1;
        Ok(())
    }

    /// An escape outside a class (`\b` and `\B` were handled as assertions).
    fn atom_escape(&mut self) -> Result<(), PatternError> {
        self.pos += 1;
        let Some(e) = self.peek() else {
            return invalid("\\ at end of pattern");
        };
        let Ok(c) = u8::try_from(e) else {
            self.pos += 1;
            self.literal(e);
            return Ok(());
        };
        match c {
            b'1'..=b'9' => {
                let start = self.pos;
                let mut n: usize = 0;
                while let Some(d) = self
                    .peek()
                    .and_then(|u| char::from_u32(u32::from(u)))
                    .and_then(|c| c.to_digit(10))
                {
                    n = n.saturating_mul(10).saturating_add(d as usize);
                    self.pos += 1;
                }
                if n <= self.ncap {
                    return unsupported(
                        "back-references are not supported by the linear-time engine",
                    );
                }
                // Annex B: not a group number, so an octal escape or a literal 8 or 9.
                self.pos = start;
                if c >= b'8' {
                    self.pos += 1;
                    self.literal(e);
                } else {
                    let unit = self.legacy_octal();
                    self.literal(unit);
                }
                Ok(())
            }
            b'k' if self.has_named => {
                self.pos += 1;
                if !is(self.peek(), b'<') {
                    return invalid("invalid named reference");
                }
                let start = self.pos + 1;
                let end = self
                    .src
                    .get(start..)
                    .unwrap_or(&[])
                    .iter()
                    .position(|&u| u == u16::from(b'>'))
                    .map(|n| start + n);
                let Some(end) = end else {
                    return invalid("invalid named reference");
                };
                let name = self.src.get(start..end).unwrap_or(&[]);
                if self.group_names.iter().any(|g| g == name) {
                    unsupported("back-references are not supported by the linear-time engine")
                } else {
                    invalid("invalid named capture referenced")
                }
            }
            _ => match self.escape_common(c, false)? {
                ClassAtom::Unit(u) => {
                    self.literal(u);
                    Ok(())
                }
                ClassAtom::Set(set) => {
                    self.emit_set(&set);
                    Ok(())
                }
            },
        }
    }

    /// Escapes shared by atoms and classes; `self.pos` is at the unit after the backslash.
    fn escape_common(&mut self, c: u8, in_class: bool) -> Result<ClassAtom, PatternError> {
        let e = u16::from(c);
        self.pos += 1;
        let atom = match c {
            b'd' => ClassAtom::Set(UnitSet::from_ranges(DIGITS)),
            b'D' => ClassAtom::Set(UnitSet::from_ranges(DIGITS).complement()),
            b's' => ClassAtom::Set(UnitSet::from_ranges(SPACE)),
            b'S' => ClassAtom::Set(UnitSet::from_ranges(SPACE).complement()),
            b'w' => ClassAtom::Set(UnitSet::from_ranges(WORD)),
            b'W' => ClassAtom::Set(UnitSet::from_ranges(WORD).complement()),
            b'f' => ClassAtom::Unit(0x0C),
            b'n' => ClassAtom::Unit(0x0A),
            b'r' => ClassAtom::Unit(0x0D),
            b't' => ClassAtom::Unit(0x09),
            b'v' => ClassAtom::Unit(0x0B),
            b'0'..=b'7' => {
                self.pos -= 1;
                ClassAtom::Unit(self.legacy_octal())
            }
            b'c' => {
                let letter = self.peek().and_then(|u| u8::try_from(u).ok()).filter(|b| {
                    b.is_ascii_alphabetic() || (in_class && (b.is_ascii_digit() || *b == b'_'))
                });
                match letter {
                    Some(b) => {
                        self.pos += 1;
                        ClassAtom::Unit(u16::from(b % 32))
                    }
                    None => {
                        // Annex B: the backslash is a literal and `c` is read again as itself.
                        self.pos -= 1;
                        ClassAtom::Unit(u16::from(b'\\'))
                    }
                }
            }
            b'x' => match self.hex_digits(2) {
                Some(v) => ClassAtom::Unit(v),
                None => ClassAtom::Unit(e),
            },
            b'u' => match self.hex_digits(4) {
                Some(v) => ClassAtom::Unit(v),
                None => ClassAtom::Unit(e),
            },
            b'k' if self.has_named => return invalid("invalid escape"),
            // Annex B identity escapes: `\a` is `a`, `\8` is `8`, `\/` is `/`.
            _ => ClassAtom::Unit(e),
        };
        Ok(atom)
    }

    /// Reads `n` hex digits if they are all there.
    fn hex_digits(&mut self, n: usize) -> Option<u16> {
        let mut v: u32 = 0;
        for i in 0..n {
            v = v * 16 + hex_value(self.peek_at(i)?)?;
        }
        self.pos += n;
        u16::try_from(v).ok()
    }

    /// Annex B `LegacyOctalEscapeSequence` at the current position (a digit 0-7): up to three
    /// octal digits while the value stays below 256.
    fn legacy_octal(&mut self) -> u16 {
        let octal = |u: Option<u16>| u.filter(|&u| (0x30..=0x37).contains(&u)).map(|u| u - 0x30);
        let Some(first) = octal(self.peek()) else {
            return 0;
        };
        self.pos += 1;
        let mut v = first;
        if let Some(d) = octal(self.peek()) {
            v = v * 8 + d;
            self.pos += 1;
            if first <= 3 {
                if let Some(d) = octal(self.peek()) {
                    v = v * 8 + d;
                    self.pos += 1;
                }
            }
        }
        v
    }

    /// A class after its `[`, up to and including its `]`.
    fn class(&mut self) -> Result<UnitSet, PatternError> {
        let negated = is(self.peek(), b'^');
        if negated {
            self.pos += 1;
        }
        let mut set = UnitSet::default();
        loop {
            match self.peek() {
                None => return invalid("unterminated character class"),
                Some(u) if u == u16::from(b']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {}
            }
            let first = self.class_atom()?;
            let is_range =
                is(self.peek(), b'-') && self.peek_at(1).is_some_and(|u| u != u16::from(b']'));
            if !is_range {
                add_atom(&mut set, first);
                continue;
            }
            self.pos += 1;
            let second = self.class_atom()?;
            match (first, second) {
                (ClassAtom::Unit(lo), ClassAtom::Unit(hi)) => {
                    if lo > hi {
                        return invalid("range out of order in character class");
                    }
                    set.add_range(lo, hi);
                }
                // Annex B: a range with a class escape at either end is the union of both
                // ends and a literal `-`.
                (first, second) => {
                    add_atom(&mut set, first);
                    set.add_range(u16::from(b'-'), u16::from(b'-'));
                    add_atom(&mut set, second);
                }
            }
        }
        if self.ignore_case {
            set = set.case_closure();
        }
        Ok(if negated { set.complement() } else { set })
    }

    fn class_atom(&mut self) -> Result<ClassAtom, PatternError> {
        let Some(u) = self.peek() else {
            return invalid("unterminated character class");
        };
        self.pos += 1;
        if u != u16::from(b'\\') {
            return Ok(ClassAtom::Unit(u));
        }
        let Some(e) = self.peek() else {
            return invalid("\\ at end of pattern");
        };
        let Ok(c) = u8::try_from(e) else {
            self.pos += 1;
            return Ok(ClassAtom::Unit(e));
        };
        match c {
            b'b' => {
                self.pos += 1;
                Ok(ClassAtom::Unit(0x08))
            }
            // Annex B: in a class `\8` and `\9` are the digits, and `\1`-`\7` are octal.
            b'8' | b'9' => {
                self.pos += 1;
                Ok(ClassAtom::Unit(e))
            }
            _ => self.escape_common(c, true),
        }
    }

    /// Emits one literal unit (widened to its case class under the `i` flag).
    fn literal(&mut self, u: u16) {
        if self.ignore_case {
            let set = UnitSet::single(u).case_closure();
            self.emit_set(&set);
        } else {
            push_unit(&mut self.out, u);
        }
    }

    fn emit_set(&mut self, set: &UnitSet) {
        if let [(lo, hi)] = set.ranges.as_slice() {
            if lo == hi {
                push_unit(&mut self.out, *lo);
                return;
            }
        }
        if set.ranges.is_empty() {
            // A class that can match nothing, such as JavaScript's `[]`.
            self.out.push_str(r"[^\x{0}-\x{10FFFF}]");
            return;
        }
        self.out.push('[');
        for &(lo, hi) in &set.ranges {
            // Split around the surrogate block, whose units are written as stand-ins.
            for (a, b) in [
                (lo, hi.min(0xD7FF)),
                (lo.max(0xD800), hi.min(0xDFFF)),
                (lo.max(0xE000), hi),
            ] {
                if a <= b {
                    push_unit(&mut self.out, a);
                    if a != b {
                        self.out.push('-');
                        push_unit(&mut self.out, b);
                    }
                }
            }
        }
        self.out.push(']');
    }
}

fn add_atom(set: &mut UnitSet, atom: ClassAtom) {
    match atom {
        ClassAtom::Unit(u) => set.add_range(u, u),
        ClassAtom::Set(s) => set.add_set(&s),
    }
}

/// Writes a unit as a `regex` crate literal: ASCII letters and digits as they are, anything
/// else as `\x{…}` so no character is ever read as syntax.
fn push_unit(out: &mut String, u: u16) {
    let c = unit_char(u);
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:X}}}", u32::from(c)));
    }
}

/// Group names: ASCII identifiers are checked exactly; other names are refused as
/// unsupported rather than guessing JavaScript's identifier tables.
fn check_group_name(name: &[u16]) -> Result<(), PatternError> {
    let ascii: Option<Vec<u8>> = name.iter().map(|&u| u8::try_from(u).ok()).collect();
    let Some(ascii) = ascii.filter(|a| a.is_ascii()) else {
        return unsupported("non-ASCII capture group names are not supported");
    };
    let start_ok = |b: &u8| b.is_ascii_alphabetic() || *b == b'$' || *b == b'_';
    let part_ok = |b: &u8| start_ok(b) || b.is_ascii_digit();
    match ascii.split_first() {
        Some((first, rest)) if start_ok(first) && rest.iter().all(part_ok) => Ok(()),
        _ => {
            if ascii.contains(&b'\\') {
                unsupported("escapes in capture group names are not supported")
            } else {
                invalid("invalid capture group name")
            }
        }
    }
}
