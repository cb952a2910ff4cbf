//! Resolve and batch request bodies, read in one pass.
//!
//! Parsing a body into a `serde_json::Value` tree, then looking its members up, would allocate
//! every key and string of the document (about a tenth of the server's CPU per single
//! resolve; P9). [`ResolveBody`] reads the members the routes use as
//! it meets them: identity strings are borrowed from the body when they hold no escapes,
//! `attributes` (the only member conditions read as JSON) becomes a list of borrowed names
//! and JSON values that conditions read in place ([`BodyAttributes`]), `placement_keys` and
//! `app_id` a value, and every other member is skipped without being built. The document must
//! still be well-formed UTF-8 JSON as a whole; inside members the routes skip, serde's skipping
//! does not check number ranges, lone surrogate escapes or nesting beyond 128 levels, which
//! the `Value` reading refused with a 400 (nothing reads those members, so they are accepted).
//!
//! The semantics are those of the `Value` reading it replaced: a member given twice keeps its
//! last value, unknown members are ignored, and a valid document that is not an object is
//! [`Parsed::NotObject`].

use std::borrow::Cow;
use std::fmt;

use flowgate_domain::conditions::Attributes;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A member the routes read as a string: absent, `null`, a string, or anything else.
#[derive(Debug, Default, PartialEq, Eq)]
pub enum Field<'a> {
    /// Not in the body.
    #[default]
    Missing,
    /// `null`.
    Null,
    /// A string, borrowed from the body unless it held escapes.
    Str(Cow<'a, str>),
    /// A number, boolean, array or object.
    NotString,
}

/// The members of a resolve (or batch, or legacy resolve) body.
#[derive(Debug, Default)]
pub struct ResolveBody<'a> {
    /// `user_id`.
    pub user_id: Field<'a>,
    /// `session_id`.
    pub session_id: Field<'a>,
    /// `device_platform`.
    pub device_platform: Field<'a>,
    /// `attributes`.
    pub attributes: Attrs<'a>,
    /// `placement_keys` (batch), as sent.
    pub placement_keys: Option<Value>,
    /// `app_id` (legacy resolve), as sent.
    pub app_id: Option<Value>,
}

/// A valid JSON document: an object's members, or the fact that it is not an object.
#[derive(Debug)]
pub enum Parsed<'a> {
    /// The body was an object.
    Object(ResolveBody<'a>),
    /// The body was valid JSON of another type.
    NotObject,
}

impl<'a> Parsed<'a> {
    /// Parses a whole body (trailing characters are an error, as in `serde_json::from_slice`).
    /// The body must be UTF-8 throughout, skipped members included.
    pub fn from_slice(bytes: &'a [u8]) -> serde_json::Result<Self> {
        let text = std::str::from_utf8(bytes).map_err(|e| {
            <serde_json::Error as de::Error>::custom(format_args!(
                "invalid UTF-8 at byte {}",
                e.valid_up_to()
            ))
        })?;
        serde_json::from_str(text)
    }
}

impl<'de> Deserialize<'de> for Field<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FieldVisitor)
    }
}

struct FieldVisitor;

/// The visitor methods for numbers, booleans and arrays (skipped) of a visitor that answers
/// every such value with `$value` ("not a string", "not an object").
macro_rules! other_kinds {
    ($value:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($value)
        }
    };
}

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Field::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Field::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Field::Str(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Field::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Field::Null)
    }
    other_kinds!(Field::NotString);
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Field::NotString)
    }
}

/// The `attributes` member: absent, `null`, an object, or anything else.
#[derive(Debug, Default)]
pub enum Attrs<'a> {
    /// Not in the body.
    #[default]
    Missing,
    /// `null`.
    Null,
    /// An object.
    Object(BodyAttributes<'a>),
    /// A string, number, boolean or array.
    NotObject,
}

/// The members of an `attributes` object as they were parsed: names borrowed from the body
/// (unless escaped), values as JSON. Conditions read them through the domain's [`Attributes`]
/// port, so no map is built per request; a name given twice reads as its last value.
#[derive(Debug, Default)]
pub struct BodyAttributes<'a> {
    members: Vec<(Cow<'a, str>, Value)>,
    /// Sorted by name (last duplicate kept) for binary search, when there are many.
    sorted: bool,
}

/// Above this many members a lookup binary-searches a sorted copy instead of scanning.
const SCAN_MAX: usize = 16;

impl<'a> BodyAttributes<'a> {
    fn new(mut members: Vec<(Cow<'a, str>, Value)>) -> Self {
        let sorted = members.len() > SCAN_MAX;
        if sorted {
            // Stable: equal names keep their order, so the last of each run is the last sent.
            members.sort_by(|a, b| a.0.cmp(&b.0));
            let mut kept: Vec<(Cow<'a, str>, Value)> = Vec::with_capacity(members.len());
            for member in members {
                match kept.last_mut() {
                    Some(last) if last.0 == member.0 => *last = member,
                    _ => kept.push(member),
                }
            }
            members = kept;
        }
        Self { members, sorted }
    }
}

impl Attributes for BodyAttributes<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        if self.sorted {
            let i = self
                .members
                .binary_search_by(|(name, _)| name.as_ref().cmp(key))
                .ok()?;
            return Some(&self.members[i].1);
        }
        self.members
            .iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value)
    }
}

impl<'de> Deserialize<'de> for Attrs<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(AttrsVisitor)
    }
}

/// A member name, borrowed from the body unless it held escapes.
struct Name<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Name(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Name(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Name(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

struct AttrsVisitor;

impl<'de> Visitor<'de> for AttrsVisitor {
    type Value = Attrs<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8).min(64));
        while let Some(Name(name)) = map.next_key()? {
            members.push((name, map.next_value::<Value>()?));
        }
        Ok(Attrs::Object(BodyAttributes::new(members)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Attrs::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Attrs::Null)
    }
    other_kinds!(Attrs::NotObject);
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Attrs::NotObject)
    }
}

/// The member names the routes read; any other is skipped.
enum Member {
    UserId,
    SessionId,
    DevicePlatform,
    Attributes,
    PlacementKeys,
    AppId,
    Other,
}

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MemberVisitor;
        impl Visitor<'_> for MemberVisitor {
            type Value = Member;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            // Escaped names arrive here decoded, so `"user\u005fid"` is `user_id`.
            fn visit_str<E>(self, v: &str) -> Result<Member, E> {
                Ok(match v {
                    "user_id" => Member::UserId,
                    "session_id" => Member::SessionId,
                    "device_platform" => Member::DevicePlatform,
                    "attributes" => Member::Attributes,
                    "placement_keys" => Member::PlacementKeys,
                    "app_id" => Member::AppId,
                    _ => Member::Other,
                })
            }
        }
        deserializer.deserialize_identifier(MemberVisitor)
    }
}

impl<'de> Deserialize<'de> for Parsed<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DocumentVisitor)
    }
}

struct DocumentVisitor;

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Parsed<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON document")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut body = ResolveBody::default();
        while let Some(member) = map.next_key::<Member>()? {
            match member {
                Member::UserId => body.user_id = map.next_value()?,
                Member::SessionId => body.session_id = map.next_value()?,
                Member::DevicePlatform => body.device_platform = map.next_value()?,
                Member::Attributes => body.attributes = map.next_value()?,
                Member::PlacementKeys => body.placement_keys = Some(map.next_value()?),
                Member::AppId => body.app_id = Some(map.next_value()?),
                Member::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Parsed::Object(body))
    }
    other_kinds!(Parsed::NotObject);
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Parsed::NotObject)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Parsed::NotObject)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(text: &str) -> ResolveBody<'_> {
        match Parsed::from_slice(text.as_bytes()).unwrap() {
            Parsed::Object(body) => body,
            Parsed::NotObject => panic!("not an object: {text}"),
        }
    }

    #[test]
    fn members_are_read_and_others_skipped() {
        let body = object(
            r#"{"user_id":"u-1","skip":{"a":[1,{"b":null}]},"session_id":"s","device_platform":"ios",
                "attributes":{"country":"US","n":2},"placement_keys":["a","b"],"app_id":"x"}"#,
        );
        assert_eq!(body.user_id, Field::Str(Cow::Borrowed("u-1")));
        assert!(matches!(body.user_id, Field::Str(Cow::Borrowed(_))));
        assert_eq!(body.session_id, Field::Str("s".into()));
        assert_eq!(body.device_platform, Field::Str("ios".into()));
        let Attrs::Object(attributes) = &body.attributes else {
            panic!("{:?}", body.attributes)
        };
        assert_eq!(attributes.get("country"), Some(&json!("US")));
        assert_eq!(attributes.get("n"), Some(&json!(2)));
        assert_eq!(attributes.get("absent"), None);
        assert_eq!(body.placement_keys, Some(json!(["a", "b"])));
        assert_eq!(body.app_id, Some(json!("x")));
    }

    #[test]
    fn kinds_of_field_values() {
        let body = object(r#"{"user_id":null,"session_id":7,"device_platform":["ios"]}"#);
        assert_eq!(body.user_id, Field::Null);
        assert_eq!(body.session_id, Field::NotString);
        assert_eq!(body.device_platform, Field::NotString);
        assert!(matches!(body.attributes, Attrs::Missing));
        assert!(matches!(
            object(r#"{"attributes":null}"#).attributes,
            Attrs::Null
        ));
        for value in ["[]", "[{\"a\":1}]", "\"US\"", "1", "true"] {
            let text = format!("{{\"attributes\":{value}}}");
            assert!(
                matches!(object(&text).attributes, Attrs::NotObject),
                "{value}"
            );
        }
        for value in ["true", "1.5", "-3", "{}", "{\"a\":[]}", "[]"] {
            let text = format!("{{\"user_id\":{value}}}");
            assert_eq!(object(&text).user_id, Field::NotString, "{value}");
        }
        assert_eq!(object("{}").user_id, Field::Missing);
    }

    #[test]
    fn escapes_are_decoded_in_values_and_names() {
        let body = object(r#"{"user\u005fid":"a\"b\u00e9"}"#);
        assert_eq!(
            body.user_id,
            Field::Str(Cow::Owned("a\"b\u{e9}".to_owned()))
        );
    }

    #[test]
    fn a_member_given_twice_keeps_its_last_value() {
        let body = object(
            r#"{"user_id":"first","user_id":"second","attributes":{"a":1},"attributes":null}"#,
        );
        assert_eq!(body.user_id, Field::Str("second".into()));
        assert!(matches!(body.attributes, Attrs::Null));
    }

    fn attributes(text: &str) -> BodyAttributes<'_> {
        match object(text).attributes {
            Attrs::Object(attributes) => attributes,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn attributes_read_their_last_value_with_few_and_many_members() {
        let few = attributes(
            r#"{"attributes":{"plan":"free","app.version":"2.4.1","plan":"pro","n\u0061me":{"a":[1]}}}"#,
        );
        assert!(!few.sorted);
        assert_eq!(few.get("plan"), Some(&json!("pro")));
        assert_eq!(few.get("app.version"), Some(&json!("2.4.1")));
        assert_eq!(few.get("name"), Some(&json!({"a": [1]})));
        assert_eq!(few.get("app"), None);
        // Many members: sorted for binary search, the last duplicate still wins.
        let mut members: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        members.insert(3, "\"k7\":\"first\"".to_owned());
        members.push("\"k3\":\"last\"".to_owned());
        let text = format!("{{\"attributes\":{{{}}}}}", members.join(","));
        let many = attributes(&text);
        assert!(many.sorted);
        assert_eq!(many.members.len(), 40);
        assert_eq!(many.get("k3"), Some(&json!("last")));
        assert_eq!(many.get("k7"), Some(&json!(7)));
        assert_eq!(many.get("k39"), Some(&json!(39)));
        assert_eq!(many.get("k40"), None);
        assert_eq!(BodyAttributes::default().get("k1"), None);
    }

    #[test]
    fn other_documents_are_not_objects_and_invalid_json_is_an_error() {
        for text in [
            "[1,{\"user_id\":\"u\"}]",
            "\"s\"",
            "null",
            "true",
            "12",
            "-1.5e3",
        ] {
            assert!(
                matches!(Parsed::from_slice(text.as_bytes()), Ok(Parsed::NotObject)),
                "{text}"
            );
        }
        for text in [
            "{",
            "{\"user_id\":}",
            "{\"a\":1}x",
            "[1,]",
            "{\"skip\":[1,2}",
            "{\"user_id\":\"\\x\"}",
        ] {
            assert!(Parsed::from_slice(text.as_bytes()).is_err(), "{text}");
        }
        // Invalid UTF-8 is refused even in a member nothing reads.
        let err = Parsed::from_slice(b"{\"skip\":\"\xff\",\"user_id\":\"u\"}").unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
    }
}
