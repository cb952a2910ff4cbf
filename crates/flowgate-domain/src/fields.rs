//! The field rules of identities (resolve bodies, D3.6), declared with `validator`. An event's
//! members have their rules in the event
//! field table ([`crate::events::EVENT_FIELDS`]) instead: one entry per member drives its
//! validation, where it is kept and its API description, which `validator`'s per-struct
//! attributes cannot.

use std::borrow::Cow;

use serde_json::Value;
use validator::{Validate, ValidationError, ValidationErrors, ValidationErrorsKind};

use crate::events::MAX_TEXT_CHARS;

/// The identity strings of a resolve or batch resolve body (D3.6), which a `resolve_no_flow`
/// event stores (D8).
#[derive(Clone, Copy, Debug)]
pub struct IdentityText<'a> {
    /// The SDK's user id.
    pub user_id: &'a str,
    /// The SDK's session id.
    pub session_id: &'a str,
}

impl IdentityText<'_> {
    /// The rule `user_id` breaks and the rule `session_id` breaks, if any (each its first:
    /// length before NUL).
    pub fn broken_rules(&self) -> (Option<FieldRule>, Option<FieldRule>) {
        let rules = IdentityRules {
            user_id: self.user_id,
            session_id: self.session_id,
        };
        match rules.validate() {
            Ok(()) => (None, None),
            Err(errors) => (
                broken_rule(&errors, "user_id"),
                broken_rule(&errors, "session_id"),
            ),
        }
    }
}

/// [`IdentityText`]'s rules, declared with `validator` (which stays out of the public API).
#[derive(Validate)]
struct IdentityRules<'a> {
    #[validate(length(min = 1, max = MAX_TEXT_CHARS), custom(function = "storable"))]
    user_id: &'a str,
    #[validate(length(min = 1, max = MAX_TEXT_CHARS), custom(function = "storable"))]
    session_id: &'a str,
}

/// Why a field broke its rule.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldRule {
    /// Its length is outside `min..=max` characters.
    Length {
        /// The fewest characters allowed.
        min: u64,
        /// The most characters allowed.
        max: u64,
    },
    /// It holds the NUL character, which the store cannot keep.
    Nul,
}

impl std::fmt::Display for FieldRule {
    /// The rule as a field's error message says it: "must be 1 to 256 characters".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldRule::Length { min, max } => write!(f, "must be {min} to {max} characters"),
            FieldRule::Nul => f.write_str("must not contain the NUL character (U+0000)"),
        }
    }
}

/// The rule `field` broke in `errors`, if it broke one (length before NUL, as declared).
fn broken_rule(errors: &ValidationErrors, field: &str) -> Option<FieldRule> {
    let Some(ValidationErrorsKind::Field(list)) = errors.errors().get(field) else {
        return None;
    };
    let first = list.first()?;
    let bound = |name: &str| first.params.get(name).and_then(Value::as_u64);
    Some(match first.code.as_ref() {
        "length" => FieldRule::Length {
            min: bound("min").unwrap_or(0),
            max: bound("max").unwrap_or(MAX_TEXT_CHARS),
        },
        _ => FieldRule::Nul,
    })
}

/// The store keeps no NUL character (U+0000) in text (PostgreSQL refuses it).
fn storable<S: AsRef<str> + ?Sized>(value: &S) -> Result<(), ValidationError> {
    if value.as_ref().contains('\0') {
        return Err(ValidationError::new("nul")
            .with_message(Cow::Borrowed("must not contain the NUL character (U+0000)")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_text_counts_characters_and_refuses_nul() {
        let ok = IdentityText {
            user_id: &"🦀".repeat(256),
            session_id: "s",
        };
        assert_eq!(
            ok.broken_rules(),
            (None, None),
            "256 characters of 4 bytes each"
        );
        let long = "a".repeat(257);
        let broken = IdentityText {
            user_id: &long,
            session_id: "a\0b",
        }
        .broken_rules();
        assert_eq!(
            broken,
            (
                Some(FieldRule::Length { min: 1, max: 256 }),
                Some(FieldRule::Nul)
            )
        );
        let empty = IdentityText {
            user_id: "",
            session_id: "s",
        };
        assert_eq!(
            empty.broken_rules(),
            (Some(FieldRule::Length { min: 1, max: 256 }), None)
        );
    }

    #[test]
    fn a_broken_rule_reads_as_the_field_error_clients_get() {
        assert_eq!(
            FieldRule::Length { min: 1, max: 256 }.to_string(),
            "must be 1 to 256 characters"
        );
        assert_eq!(
            FieldRule::Nul.to_string(),
            "must not contain the NUL character (U+0000)"
        );
    }
}
