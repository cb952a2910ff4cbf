//! The text rule of identities (resolve bodies, D3.6), which a `resolve_no_flow` event stores
//! (D8). Stated once: `user_id` and `session_id` take their bounds from
//! [`IDENTITY_TEXT`], the kind of their entries in the event field table
//! ([`crate::events::EVENT_FIELDS`]), and are checked by the same
//! [`broken_text_rule`] as every event string, so a resolve and an event agree on what a user
//! id may be.
//!
//! Why not `validator` (the design card's crate, used here before): its derive checked these
//! two strings' length and NUL, beside the table that states the same rules for events; it
//! was a second mechanism, and it brought 54 of the 77 crates an embedder of the domain
//! compiled (`cargo tree -p flowgate-domain -e normal`: `idna` and ICU for its e-mail and URL
//! checks, which nothing here uses). D31.

use crate::events::{broken_text_rule, FieldKind, FieldRule, IDENTITY_TEXT};

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
        (identity_rule(self.user_id), identity_rule(self.session_id))
    }
}

/// The rule `value` breaks as an identity string: the event table's [`IDENTITY_TEXT`].
fn identity_rule(value: &str) -> Option<FieldRule> {
    match IDENTITY_TEXT {
        FieldKind::Text { min, max } => broken_text_rule(value, min, max),
        _ => None,
    }
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
    fn the_identity_members_are_text_in_the_event_table() {
        for name in ["user_id", "session_id"] {
            let field = crate::events::EVENT_FIELDS
                .iter()
                .find(|f| f.name() == name)
                .unwrap();
            assert_eq!(field.kind(), IDENTITY_TEXT, "{name}");
        }
        assert_eq!(IDENTITY_TEXT, FieldKind::Text { min: 1, max: 256 });
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
