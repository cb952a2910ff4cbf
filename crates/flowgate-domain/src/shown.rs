//! How problem messages quote the value they are about: as JSON, cut to 80 characters (with
//! the whole length when cut), so a message shows what was found without repeating a whole
//! document.

use serde_json::Value;

const MAX: usize = 80;

/// `value` as a message quotes it.
pub fn shown(value: &Value) -> String {
    let text = value.to_string();
    let chars = text.chars().count();
    if chars <= MAX {
        text
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}… ({chars} characters)")
    }
}

/// A string as a message quotes it: `"bad key!"`.
pub fn shown_str(value: &str) -> String {
    shown(&Value::String(value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_whole_long_ones_cut() {
        assert_eq!(shown_str("bad key!"), "\"bad key!\"");
        assert_eq!(shown(&serde_json::json!([1, "a"])), "[1,\"a\"]");
        let long = "x".repeat(200);
        let cut = shown_str(&long);
        assert!(cut.starts_with("\"xxx"), "{cut}");
        assert!(cut.ends_with("… (202 characters)"), "{cut}");
        assert_eq!(
            cut.chars().count(),
            80 + "… (202 characters)".chars().count()
        );
    }
}
