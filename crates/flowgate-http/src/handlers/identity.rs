//! The identity fields of resolve and batch resolve bodies.

use std::borrow::Cow;

use flowgate_domain::events::is_storable_text;
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

fn string_field<'a>(field: Field<'a>, name: &str, errors: &mut Vec<FieldError>) -> Cow<'a, str> {
    match field {
        Field::Missing | Field::Null => {
            errors.push(FieldError::new(name, "is required"));
            Cow::Borrowed("")
        }
        Field::Str(s) if !(1..=256).contains(&s.chars().count()) => {
            errors.push(FieldError::new(name, "must be 1 to 256 characters"));
            Cow::Borrowed("")
        }
        // D8: the `resolve_no_flow` event stores the identity, and the store cannot keep NUL.
        Field::Str(s) if !is_storable_text(&s) => {
            errors.push(FieldError::new(
                name,
                "must not contain the NUL character (U+0000)",
            ));
            Cow::Borrowed("")
        }
        Field::Str(s) => s,
        Field::NotString => {
            errors.push(FieldError::new(name, "must be a string"));
            Cow::Borrowed("")
        }
    }
}

/// Takes the identity members out of the body (moved, not copied).
pub(crate) fn identity<'a>(
    body: &mut ResolveBody<'a>,
    errors: &mut Vec<FieldError>,
) -> Identity<'a> {
    let user_id = string_field(std::mem::take(&mut body.user_id), "user_id", errors);
    let session_id = string_field(std::mem::take(&mut body.session_id), "session_id", errors);
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
