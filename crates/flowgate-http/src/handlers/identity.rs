//! The identity fields of resolve and batch resolve bodies.

use std::borrow::Cow;

use flowgate_domain::fields::IdentityText;
use flowgate_domain::{Platform, ResolveRequest};

use crate::problem::FieldError;
use crate::resolve_body::{Attrs, BodyAttributes, Field, ResolveBody};

/// Identity fields of resolve and batch bodies (D3.6).
pub(crate) struct Identity<'a> {
    user_id: Cow<'a, str>,
    session_id: Cow<'a, str>,
    platform: Platform,
    attributes: BodyAttributes<'a>,
}

impl Identity<'_> {
    /// The resolve request of this identity.
    pub(crate) fn request(&self) -> ResolveRequest<'_> {
        ResolveRequest::new(
            &self.user_id,
            &self.session_id,
            self.platform,
            &self.attributes,
        )
    }
}

/// The string in `field`, or what is wrong with its presence or type (its length and text
/// rules are [`IdentityText`]'s).
fn string_field(field: Field<'_>) -> Result<Cow<'_, str>, &'static str> {
    match field {
        Field::Missing | Field::Null => Err("is required"),
        Field::Str(s) => Ok(s),
        Field::NotString => Err("must be a string"),
    }
}

/// `user_id` and `session_id`, each reported with its first error: presence and type, then
/// the rules [`IdentityText`] declares (D3.6; the `resolve_no_flow` event stores them, D8).
fn identity_strings<'a>(
    user_id: Field<'a>,
    session_id: Field<'a>,
    errors: &mut Vec<FieldError>,
) -> (Cow<'a, str>, Cow<'a, str>) {
    let (user_id, session_id) = (string_field(user_id), string_field(session_id));
    // A field with a type error is checked as a placeholder that breaks no rule.
    let text = IdentityText {
        user_id: user_id.as_deref().unwrap_or("-"),
        session_id: session_id.as_deref().unwrap_or("-"),
    };
    let (user_rule, session_rule) = text.broken_rules();
    for (name, typed, broken) in [
        ("user_id", &user_id, user_rule),
        ("session_id", &session_id, session_rule),
    ] {
        let message = match typed {
            Err(message) => Cow::Borrowed(*message),
            Ok(_) => match broken {
                None => continue,
                Some(rule) => Cow::Owned(rule.to_string()),
            },
        };
        errors.push(FieldError::new(name, message));
    }
    (
        user_id.unwrap_or(Cow::Borrowed("")),
        session_id.unwrap_or(Cow::Borrowed("")),
    )
}

/// Takes the identity members out of the body (moved, not copied).
pub(crate) fn identity<'a>(
    body: &mut ResolveBody<'a>,
    errors: &mut Vec<FieldError>,
) -> Identity<'a> {
    let (user_id, session_id) = identity_strings(
        std::mem::take(&mut body.user_id),
        std::mem::take(&mut body.session_id),
        errors,
    );
    let platform = match &body.device_platform {
        Field::Missing | Field::Null => {
            errors.push(FieldError::new("device_platform", "is required"));
            Platform::Web
        }
        Field::Str(s) => Platform::parse(s).unwrap_or_else(|| {
            errors.push(FieldError::new(
                "device_platform",
                "must be one of ios, android, web",
            ));
            Platform::Web
        }),
        Field::NotString => {
            errors.push(FieldError::new(
                "device_platform",
                "must be a string: ios, android or web",
            ));
            Platform::Web
        }
    };
    let attributes = match std::mem::take(&mut body.attributes) {
        Attrs::Missing | Attrs::Null => BodyAttributes::default(),
        Attrs::Object(attributes) => attributes,
        Attrs::NotObject => {
            errors.push(FieldError::new("attributes", "must be an object"));
            BodyAttributes::default()
        }
    };
    Identity {
        user_id,
        session_id,
        platform,
        attributes,
    }
}
