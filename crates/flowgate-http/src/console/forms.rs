//! The console's free-text fields as types: each rule a `validator` attribute, each refusal
//! one sentence naming the field, what was given and what is allowed. Every form that takes a
//! comment (changes, approvals, rejections, rollouts) or names a key reads it through here.

use std::borrow::Cow;

use validator::{Validate, ValidationError, ValidationErrors, ValidationErrorsKind};

/// Characters a comment may have at most: the control plane's rule for every comment kept
/// with a decision ([`flowgate_control::review::decide::MAX_COMMENT_CHARS`]).
pub(super) const MAX_COMMENT_CHARS: u64 =
    flowgate_control::review::decide::MAX_COMMENT_CHARS as u64;

/// Characters a key's name may have at most.
pub(super) const MAX_KEY_NAME_CHARS: u64 = 200;

/// A comment as typed, trimmed.
#[derive(Validate)]
struct Comment<'a> {
    #[validate(
        custom(function = said_why),
        length(max = MAX_COMMENT_CHARS, message = "comment")
    )]
    comment: &'a str,
}

/// A key's name as typed, trimmed.
#[derive(Validate)]
struct KeyName<'a> {
    #[validate(
        custom(function = storable_name),
        length(max = MAX_KEY_NAME_CHARS, message = "name")
    )]
    name: &'a str,
}

/// A comment: trimmed, required, at most [`MAX_COMMENT_CHARS`], storable.
pub(super) fn comment_text(given: &str) -> Result<String, String> {
    let comment = given.trim();
    Comment { comment }.validate().map_err(|e| sentence(&e))?;
    Ok(comment.to_owned())
}

/// A key's name: trimmed, at most [`MAX_KEY_NAME_CHARS`], storable; an empty one is the
/// caller's to default.
pub(super) fn key_name(given: &str) -> Result<String, String> {
    let name = given.trim();
    KeyName { name }.validate().map_err(|e| sentence(&e))?;
    Ok(name.to_owned())
}

/// A comment must say why: it is kept in the audit log.
fn said_why(comment: &str) -> Result<(), ValidationError> {
    if comment.is_empty() {
        return Err(refused(
            "Say why in the comment: it is kept in the audit log.".into(),
        ));
    }
    storable("A comment", comment)
}

/// A key's name the store can keep.
fn storable_name(name: &str) -> Result<(), ValidationError> {
    storable("A key's name", name)
}

/// Refuses text the store cannot keep, quoting it. PostgreSQL's `text` cannot hold a NUL
/// character, so such text would fail every write as if the store were down (503), and
/// retrying could never help: it is refused before anything is written, as the SDK's events
/// are ([`flowgate_domain::events::is_storable_text`]).
fn storable(what: &str, text: &str) -> Result<(), ValidationError> {
    if flowgate_domain::events::is_storable_text(text) {
        Ok(())
    } else {
        Err(refused(format!(
            "{what} cannot hold a NUL character (U+0000), which the store cannot keep: {}",
            crate::problem::quoted(text)
        )))
    }
}

fn refused(message: String) -> ValidationError {
    ValidationError::new("refused").with_message(Cow::Owned(message))
}

/// The first refusal as a sentence. A length's message names the field (`comment`), and the
/// sentence says how long the value is and the most allowed; any other's message is the
/// sentence.
fn sentence(errors: &ValidationErrors) -> String {
    let mut refusals: Vec<&ValidationError> = errors
        .errors()
        .values()
        .flat_map(|kind| match kind {
            ValidationErrorsKind::Field(refusals) => refusals.iter().collect(),
            _ => Vec::new(),
        })
        .collect();
    // The content's refusal before its length's: a NUL is reported even in a long text.
    refusals.sort_by_key(|r| r.code != "refused");
    let Some(refusal) = refusals.first() else {
        return "The form was refused.".to_owned();
    };
    let message = refusal.message.as_deref().unwrap_or_default();
    if refusal.code != "length" {
        return message.to_owned();
    }
    let given = refusal
        .params
        .get("value")
        .and_then(|v| v.as_str())
        .map_or(0, |v| v.chars().count());
    let max = refusal
        .params
        .get("max")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_default();
    format!("The {message} has {given} characters; at most {max}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comment_is_required_bounded_and_storable() {
        assert_eq!(comment_text("  launch now \n").unwrap(), "launch now");
        assert_eq!(
            comment_text("   ").unwrap_err(),
            "Say why in the comment: it is kept in the audit log."
        );
        let longest = "é".repeat(2000);
        assert_eq!(comment_text(&longest).unwrap(), longest);
        assert_eq!(
            comment_text(&format!("{longest}e")).unwrap_err(),
            "The comment has 2001 characters; at most 2000."
        );
        let nul = comment_text(&format!("launch\0now{}", "x".repeat(3000))).unwrap_err();
        assert!(
            nul.starts_with("A comment cannot hold a NUL character (U+0000)")
                && nul.contains(r"launch\0now"),
            "{nul}"
        );
    }

    #[test]
    fn a_key_name_is_bounded_and_storable_and_may_be_empty() {
        assert_eq!(key_name("  ").unwrap(), "");
        assert_eq!(key_name(" web ").unwrap(), "web");
        assert_eq!(
            key_name(&"n".repeat(201)).unwrap_err(),
            "The name has 201 characters; at most 200."
        );
        let nul = key_name("key\0name").unwrap_err();
        assert!(
            nul.starts_with("A key's name cannot hold") && nul.contains(r"key\0name"),
            "{nul}"
        );
    }
}
