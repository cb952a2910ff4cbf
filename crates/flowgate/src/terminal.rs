//! What the command line writes to a terminal (issue 65). Text from the store (a sign-in's
//! email in the audit log, a comment, a name) is escaped, so that it cannot move the cursor,
//! clear the screen, recolour, hide or forge lines on an operator's terminal; and a command
//! whose standard output is closed before it is done (`flowgate rollouts list | head -1`) ends
//! quietly, as a process ended by SIGPIPE, instead of panicking.
//!
//! Every human-readable line goes through [`outln!`] (standard output) or [`errln!`] (standard
//! error), which escape the whole line; a block of lines built beforehand goes through
//! [`lines`]. JSON goes through [`json`]. Escaping is idempotent (an escaped text holds no
//! control character), so text escaped where it is built may pass through them again.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{ErrorKind, Write};

/// The exit status of a command whose standard output was closed before it was done: 128 +
/// SIGPIPE (13), what a shell reports for a process that SIGPIPE ended, as `git log | head -1`
/// does.
pub const CLOSED_OUTPUT: i32 = 141;

/// Whether `c` must not reach a terminal as it is: a control character (C0, DEL, C1: an 8-bit
/// CSI is U+009B), or an invisible character that reorders or breaks the text around it
/// (bidirectional overrides and isolates, the line and paragraph separators).
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every character of [`unsafe_char`] escaped: `\n`, `\r` and `\t` by name, other
/// ASCII ones as `\x1b`, the rest as `\u{9b}`. Other text, backslashes included, is unchanged.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) && c.is_ascii() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON text with the characters of [`unsafe_char`] that serde writes as they are (DEL, C1,
/// the invisible ones: serde escapes only C0) as `\u` escapes: the same JSON, safe on a
/// terminal. They can only be inside strings, where `\u009b` means the same.
pub fn escape_json(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| unsafe_char(c) && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) && !matches!(c, '\n' | '\r' | '\t') {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Writes `bytes` to standard output. Closed (a reader that stopped reading): the process ends
/// at once with [`CLOSED_OUTPUT`], saying nothing; any other failure is said on standard error
/// and ends it with 1.
fn write_stdout(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(CLOSED_OUTPUT);
        }
        error_line(&format!("flowgate: cannot write to standard output: {e}"));
        std::process::exit(1);
    }
}

/// One line on standard output, escaped whole: what it holds cannot start another line.
pub fn line(text: &str) {
    let mut out = escape(text).into_owned();
    out.push('\n');
    write_stdout(out.as_bytes());
}

/// Lines built beforehand (a table, a report) on standard output, each escaped, the line breaks
/// kept: a value in them must be escaped where it is put in (see [`escape`]), or its own line
/// break would start a line.
pub fn lines(text: &str) {
    write_stdout(escape_lines(text).as_bytes());
}

/// `text` with each line escaped, its line breaks kept.
fn escape_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        out.push_str(&escape(body));
        out.push_str(end);
    }
    out
}

/// JSON text on standard output as it is, but for [`escape_json`], and a line break.
pub fn json(text: &str) {
    let mut out = escape_json(text).into_owned();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    write_stdout(out.as_bytes());
}

/// One line on standard error, escaped whole. A standard error that cannot be written to is
/// left alone: there is nowhere left to say so.
pub fn error_line(text: &str) {
    let mut out = escape(text).into_owned();
    out.push('\n');
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(out.as_bytes()).and_then(|()| err.flush());
}

/// Lines on standard output where nothing depends on them being read (a server's banner): as
/// [`lines`], a closed output ignored.
pub fn best_effort_lines(text: &str) {
    let out = escape_lines(text);
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
}

/// `println!` for the command line: the formatted line through [`line()`].
macro_rules! outln {
    () => {
        $crate::terminal::line("")
    };
    ($($arg:tt)*) => {
        $crate::terminal::line(&format!($($arg)*))
    };
}

/// `eprintln!` for the command line: the formatted line through [`error_line()`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::terminal::error_line(&format!($($arg)*))
    };
}

pub(crate) use {errln, outln};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_text_is_not() {
        assert_eq!(escape("ann@example.com"), "ann@example.com");
        assert!(matches!(escape("plain, \\ and ü"), Cow::Borrowed(_)));
        assert_eq!(
            escape("a\u{1b}[2J\u{1b}]0;owned\u{7}b"),
            "a\\x1b[2J\\x1b]0;owned\\x07b"
        );
        assert_eq!(escape("x\ny\r\tz\u{7f}"), "x\\ny\\r\\tz\\x7f");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed");
        // Idempotent: an escaped text passes through again unchanged.
        let once = escape("a\u{1b}b\nc").into_owned();
        assert_eq!(escape(&once), once);
    }

    #[test]
    fn json_keeps_its_meaning() {
        let value = serde_json::json!({"actor": "a\u{1b}[31m\u{9b}b\u{202e}\u{7f}"});
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        let safe = escape_json(&text);
        assert!(!safe.chars().any(unsafe_char_outside_layout), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap_or_default();
        assert_eq!(back, value);
    }

    /// A character of [`unsafe_char`] other than the line breaks and tabs JSON is laid out with.
    fn unsafe_char_outside_layout(c: char) -> bool {
        unsafe_char(c) && !matches!(c, '\n' | '\t' | '\r')
    }
}
