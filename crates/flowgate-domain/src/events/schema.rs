//! The members of an SDK event (D7) in one table, [`EVENT_FIELDS`]: each member's wire name,
//! JSON type and rule, whether it is required, and where a valid value is kept. The validator
//! checks and keeps members by it, the HTTP adapter describes `EventInput` in its OpenAPI
//! document from it, and the store's tests hold its list of columns to it, so a new optional
//! member is one entry here (and, when it gets a column of its own, the column).

use super::AnalyticsEvent;

/// `user_id`, `session_id` and every optional event string: at most this many characters.
pub const MAX_TEXT_CHARS: u64 = 256;
/// `sdk_version`: at most this many characters.
pub const MAX_SDK_VERSION_CHARS: u64 = 64;
/// `properties`: at most this many bytes serialised compactly.
pub(crate) const MAX_PROPERTIES_BYTES: usize = 8 * 1024;
/// `revenue`: the smallest amount one event may carry, in its `currency` (P18). A purchase
/// never carries a negative amount: a refund is not a purchase event.
pub const MIN_REVENUE: i64 = 0;
/// `revenue`: the largest amount one event may carry, in its `currency` (P18). Far above any
/// in-app price, and low enough that no experiment's sums of revenue and of its squares can
/// leave a 64-bit float's range (D22).
pub const MAX_REVENUE: i64 = 1_000_000;
/// The values of `device_platform`.
pub(crate) const PLATFORMS: &[&str] = &["ios", "android", "web"];
/// The values of `renderer_mode`.
pub(crate) const RENDERER_MODES: &[&str] = &["native", "web"];

/// Why a text value broke its rule ([`FieldKind::Text`]).
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

/// The rule of every text field (D3.6, D7), its first break: a length of `min..=max`
/// characters (Unicode scalar values), then no NUL character ([`super::is_storable_text`]).
pub fn broken_text_rule(value: &str, min: u64, max: u64) -> Option<FieldRule> {
    let chars = value.chars().count() as u64;
    if chars < min || chars > max {
        Some(FieldRule::Length { min, max })
    } else if !super::is_storable_text(value) {
        Some(FieldRule::Nul)
    } else {
        None
    }
}

/// A member's JSON type and the rule its value must keep (D7). Exhaustive on purpose: a new
/// kind must be validated and described by every reader of the table, so it should not compile
/// until they do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// A UUID string in its hyphenated form (`invalid_uuid`).
    Uuid,
    /// A string of `min..=max` characters without the NUL character (`invalid_length`,
    /// `invalid_character`).
    Text {
        /// The fewest characters.
        min: u64,
        /// The most characters.
        max: u64,
    },
    /// One of a closed set of strings.
    OneOf(&'static [&'static str]),
    /// A recognized event type an SDK may send (`unknown_event_type`,
    /// `server_only_event_type`).
    EventType,
    /// An RFC 3339 date-time with an offset, inside the accepted window (`invalid_timestamp`,
    /// `timestamp_in_future`, `timestamp_too_old`).
    Timestamp,
    /// A JSON integer that fits an `i64`, at least `min` (`invalid_number`).
    Integer {
        /// The smallest value.
        min: i64,
    },
    /// A finite JSON number in `min..=max` (`invalid_number`).
    Number {
        /// The smallest value.
        min: i64,
        /// The largest value.
        max: i64,
    },
    /// Three upper-case ASCII letters, ISO 4217 (`invalid_currency`).
    Currency,
    /// A JSON object of at most `max_bytes` serialised (`properties_too_large`).
    Object {
        /// The most bytes, serialised compactly.
        max_bytes: usize,
    },
}

/// Where a valid member's value is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kept {
    /// In a column of its own, a typed field of [`AnalyticsEvent`]: the store's column name.
    Column(&'static str),
    /// In the event's `payload`, under its wire name, as sent.
    Payload,
}

/// How an optional text member sets its typed field: the field's `with_` method.
type SetText = fn(AnalyticsEvent, Option<String>) -> AnalyticsEvent;

/// One member of an SDK event.
#[derive(Clone, Copy, Debug)]
pub struct EventField {
    name: &'static str,
    kind: FieldKind,
    required: bool,
    kept: Kept,
    description: &'static str,
    set_text: Option<SetText>,
}

impl EventField {
    /// A required member kept in `column`.
    const fn required(name: &'static str, kind: FieldKind, column: &'static str) -> Self {
        EventField {
            name,
            kind,
            required: true,
            kept: Kept::Column(column),
            description: "",
            set_text: None,
        }
    }

    /// An optional member kept in the payload.
    const fn optional(name: &'static str, kind: FieldKind) -> Self {
        EventField {
            name,
            kind,
            required: false,
            kept: Kept::Payload,
            description: "",
            set_text: None,
        }
    }

    /// An optional text member kept in `column`, set by `set`.
    const fn optional_column(name: &'static str, column: &'static str, set: SetText) -> Self {
        EventField {
            kept: Kept::Column(column),
            set_text: Some(set),
            ..EventField::optional(name, TEXT)
        }
    }

    /// With a description for the API document.
    const fn described(self, description: &'static str) -> Self {
        EventField {
            description,
            ..self
        }
    }

    /// The wire name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Its JSON type and rule.
    pub fn kind(&self) -> FieldKind {
        self.kind
    }

    /// Whether an event without it (or with `null`) is refused (`missing_field`); an optional
    /// member sent as `null` counts as absent.
    pub fn is_required(&self) -> bool {
        self.required
    }

    /// Where a valid value is kept.
    pub fn kept(&self) -> Kept {
        self.kept
    }

    /// What a client should know beyond its type and rule; empty when nothing.
    pub fn description(&self) -> &'static str {
        self.description
    }

    /// The `with_` method that sets an optional text column.
    pub(crate) fn set_text(&self) -> Option<SetText> {
        self.set_text
    }
}

/// `user_id` and `session_id`: 1 to [`MAX_TEXT_CHARS`] characters, in an event and in a
/// resolve body alike (D3.6, D7).
pub const IDENTITY_TEXT: FieldKind = FieldKind::Text {
    min: 1,
    max: MAX_TEXT_CHARS,
};
/// An optional free-form string.
const TEXT: FieldKind = FieldKind::Text {
    min: 0,
    max: MAX_TEXT_CHARS,
};
/// An optional count or duration.
const COUNT: FieldKind = FieldKind::Integer { min: 0 };

/// Every member of an SDK event. D7's checks run in a fixed sequence (`validate_event`: the
/// required members' presence and types, the ids, the strings' rules, the vocabularies, the
/// timestamp, the numbers, `properties`); within each, members are checked in this order.
/// Members not in the table are ignored and not stored (D7).
pub const EVENT_FIELDS: &[EventField] = &[
    EventField::required("event_id", FieldKind::Uuid, "event_id").described(
        "Unique within the app; an id the app already stored is accepted and not stored again. \
         Another app's events do not share these ids (D25).",
    ),
    EventField::required("app_id", FieldKind::Uuid, "app_id")
        .described("Must equal the URL's app."),
    EventField::required("flow_id", FieldKind::Uuid, "flow_id"),
    EventField::required("flow_version_id", FieldKind::Uuid, "flow_version_id")
        .described("A version (published or not) of `flow_id` in the app."),
    EventField::required("user_id", IDENTITY_TEXT, "user_id"),
    EventField::required("session_id", IDENTITY_TEXT, "session_id"),
    EventField::required(
        "device_platform",
        FieldKind::OneOf(PLATFORMS),
        "device_platform",
    ),
    EventField::required("event_type", FieldKind::EventType, "event_type"),
    EventField::required("timestamp", FieldKind::Timestamp, "occurred_at").described(
        "RFC 3339 with an offset; at most 24 h ahead of and 31 days behind the server clock.",
    ),
    EventField::required(
        "sdk_version",
        FieldKind::Text {
            min: 1,
            max: MAX_SDK_VERSION_CHARS,
        },
        "sdk_version",
    ),
    EventField::optional_column(
        "placement_id",
        "placement_key",
        AnalyticsEvent::with_placement_key,
    ),
    EventField::optional_column(
        "experiment_id",
        "experiment_id",
        AnalyticsEvent::with_experiment_id,
    ),
    EventField::optional_column("variant_id", "variant_id", AnalyticsEvent::with_variant_id),
    EventField::optional_column(
        "variant_name",
        "variant_name",
        AnalyticsEvent::with_variant_name,
    ),
    EventField::optional("screen_id", TEXT),
    EventField::optional("screen_name", TEXT),
    EventField::optional("element_id", TEXT),
    EventField::optional("element_type", TEXT),
    EventField::optional("interaction_type", TEXT),
    EventField::optional("app_version", TEXT),
    EventField::optional("country", TEXT),
    EventField::optional("runtime_version", TEXT),
    EventField::optional("renderer_mode", FieldKind::OneOf(RENDERER_MODES)),
    EventField::optional("flow_version", FieldKind::Integer { min: 1 }),
    EventField::optional("screen_index", COUNT),
    EventField::optional("time_since_flow_start_ms", COUNT),
    EventField::optional("time_on_screen_ms", COUNT),
    EventField::optional("first_paint_ms", COUNT),
    EventField::optional(
        "revenue",
        FieldKind::Number {
            min: MIN_REVENUE,
            max: MAX_REVENUE,
        },
    )
    .described(
        "The amount of one purchase in `currency`, from 0 to 1000000 inclusive (a refund is not \
         a purchase event). When present, `currency` is required.",
    ),
    EventField::optional("currency", FieldKind::Currency),
    EventField::optional(
        "properties",
        FieldKind::Object {
            max_bytes: MAX_PROPERTIES_BYTES,
        },
    )
    .described("Free-form; at most 8 KiB serialised."),
];

/// The member named `name`.
#[cfg(test)]
pub(crate) fn event_field(name: &str) -> Option<&'static EventField> {
    EVENT_FIELDS.iter().find(|f| f.name == name)
}

/// D7's members restated from the decision, not read from [`EVENT_FIELDS`], so a wrong entry
/// in the table fails the tests that compare them (here and in the validator's).
#[cfg(test)]
pub(crate) mod d7 {
    /// The required members, in D7's order.
    pub(crate) const REQUIRED_FIELDS: [&str; 10] = [
        "event_id",
        "app_id",
        "flow_id",
        "flow_version_id",
        "user_id",
        "session_id",
        "device_platform",
        "event_type",
        "timestamp",
        "sdk_version",
    ];
    /// The optional strings of at most 256 characters, in check order.
    pub(crate) const OPTIONAL_STRINGS: [&str; 12] = [
        "placement_id",
        "experiment_id",
        "variant_id",
        "variant_name",
        "screen_id",
        "screen_name",
        "element_id",
        "element_type",
        "interaction_type",
        "app_version",
        "country",
        "runtime_version",
    ];
    /// The optional integers with their minimum, in check order.
    pub(crate) const OPTIONAL_INTEGERS: [(&str, i64); 5] = [
        ("flow_version", 1),
        ("screen_index", 0),
        ("time_since_flow_start_ms", 0),
        ("time_on_screen_ms", 0),
        ("first_paint_ms", 0),
    ];
    /// The other optional members.
    pub(crate) const OTHER_OPTIONAL: [&str; 4] =
        ["revenue", "currency", "properties", "renderer_mode"];
}

#[cfg(test)]
mod tests {
    use super::d7::*;
    use super::*;

    #[test]
    fn the_field_table_holds_d7s_members_and_nothing_else() {
        let names: Vec<&str> = EVENT_FIELDS.iter().map(|f| f.name()).collect();
        let mut expected: Vec<&str> = REQUIRED_FIELDS
            .iter()
            .chain(&OPTIONAL_STRINGS)
            .chain(OPTIONAL_INTEGERS.iter().map(|(f, _)| f))
            .chain(&OTHER_OPTIONAL)
            .copied()
            .collect();
        let required: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| event_field(n).is_some_and(EventField::is_required))
            .collect();
        assert_eq!(required, REQUIRED_FIELDS, "required members, in D7's order");
        let mut sorted = names.clone();
        sorted.sort_unstable();
        expected.sort_unstable();
        assert_eq!(sorted, expected, "every member once");
        let integers: Vec<(&str, i64)> = EVENT_FIELDS
            .iter()
            .filter_map(|f| match f.kind() {
                FieldKind::Integer { min } => Some((f.name(), min)),
                _ => None,
            })
            .collect();
        assert_eq!(
            integers, OPTIONAL_INTEGERS,
            "integers and their minimum, in order"
        );
    }
}
