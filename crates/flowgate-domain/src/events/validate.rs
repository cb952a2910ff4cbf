//! Validation of one SDK analytics event (D7).
//!
//! The events endpoint hands every element of the request body to [`validate_event`] as a raw
//! [`serde_json::Value`] rather than a typed struct: D7 asks for a precise, stable error code per
//! broken rule (a missing field, a wrong JSON type, a malformed UUID, ...), and serde's derived
//! deserialisers collapse all of those into one opaque message. Working on the `Value` also lets
//! unknown top-level fields pass untouched, as D7 requires for newer SDKs.
//!
//! The checks run in the order D7 lists them and the first failure wins, so a client always sees
//! the same error for the same event. Decisions taken where D7 is silent:
//!
//! - An optional field sent as JSON `null` is treated exactly like an absent one, because older
//!   and newer SDKs serialise unset optionals as `null`. A required field sent as `null` is
//!   `missing_field`.
//! - A value of the wrong JSON type is `invalid_type` everywhere (a string where a number is
//!   expected, a number where a string is expected); `invalid_number` is kept for numbers that
//!   break a numeric rule.
//! - Integer fields accept only JSON integers that fit an `i64` (`1.0`, `1e3` and values above
//!   `i64::MAX` are `invalid_number`), so the store can keep them in signed 64-bit columns.
//! - `revenue` is the amount of one purchase, from [`MIN_REVENUE`] to [`MAX_REVENUE`] inclusive
//!   in its `currency` (D7 only asks for a finite number): a refund is not a purchase event, and
//!   one event with an amount near `f64::MAX` would otherwise overflow every revenue sum of its
//!   experiment (D22). The rejection quotes the range, not the value (see below).
//! - Lengths count Unicode scalar values (`char`s), not bytes.
//! - Error messages never echo the client's values, so an error list stays small and safe to log;
//!   only a readable `event_id` (a string of at most 256 characters) is reported back.

use std::io;

use serde_json::{Map, Value};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

use super::schema::{
    FieldKind, Kept, EVENT_FIELDS, MAX_PROPERTIES_BYTES, MAX_REVENUE, MIN_REVENUE, RENDERER_MODES,
};
use super::{AnalyticsEvent, EventSource, EventType, FieldRule};
use crate::identity::Platform;
use crate::ids::{parse_hyphenated, AppId, EventId, FlowId, FlowVersionId};

/// How the validator learns which flow versions exist (D7: `flow_version_id` must be a version
/// of the URL's app and belong to `flow_id`). Implemented by the catalog snapshot.
pub trait FlowVersionLookup {
    /// The flow that owns `version` if that version (published or not) belongs to `app`.
    fn flow_of_version(&self, app: AppId, version: FlowVersionId) -> Option<FlowId>;
}

/// The accepted window for an event's `timestamp` relative to the server clock (D7: at most
/// 24 h in the future and at most 31 days in the past; both configurable). Both bounds are
/// inclusive.
#[derive(Clone, Copy, Debug)]
pub struct ValidationLimits {
    /// How far after the server clock a `timestamp` may lie (device clocks drift).
    pub max_future: Duration,
    /// How far before the server clock a `timestamp` may lie (SDKs buffer events offline).
    pub max_past: Duration,
}

impl Default for ValidationLimits {
    /// The D7 defaults: 24 hours ahead, 31 days back.
    fn default() -> Self {
        Self {
            max_future: Duration::hours(24),
            max_past: Duration::days(31),
        }
    }
}

/// Why an event was rejected (D7). The names returned by [`EventErrorCode::as_str`] appear in
/// the events response's `errors` list and are part of the API: they never change meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventErrorCode {
    /// The event is not a JSON object.
    NotAnObject,
    /// A required field is absent or `null`.
    MissingField,
    /// A field has the wrong JSON type.
    InvalidType,
    /// An id field is not a hyphenated UUID.
    InvalidUuid,
    /// `app_id` differs from the app in the URL.
    AppMismatch,
    /// `flow_version_id` is not a version of the URL's app.
    UnknownFlowVersion,
    /// `flow_version_id` belongs to a flow other than `flow_id`.
    FlowMismatch,
    /// A string is empty where it must not be, or too long.
    InvalidLength,
    /// A string (or a key or string inside `properties`) holds the NUL character (U+0000),
    /// which the store cannot keep ([`super::is_storable_text`]).
    InvalidCharacter,
    /// `device_platform` is not `ios`, `android` or `web`.
    InvalidPlatform,
    /// `renderer_mode` is not `native` or `web`.
    InvalidRendererMode,
    /// `event_type` is not a recognized type (D7).
    UnknownEventType,
    /// `event_type` is one only the server may record (`resolve_no_flow`, D8).
    ServerOnlyEventType,
    /// `timestamp` is not RFC 3339 with an offset.
    InvalidTimestamp,
    /// `timestamp` lies further in the future than allowed.
    TimestampInFuture,
    /// `timestamp` lies further in the past than allowed.
    TimestampTooOld,
    /// A number breaks its rule (not an integer, out of range, not finite).
    InvalidNumber,
    /// `revenue` is present without `currency`.
    CurrencyRequired,
    /// `currency` is not three upper-case ASCII letters.
    InvalidCurrency,
    /// `properties` is larger than 8 KiB serialised.
    PropertiesTooLarge,
}

impl EventErrorCode {
    /// Every code, in the order the checks run.
    pub const ALL: &'static [EventErrorCode] = &[
        EventErrorCode::NotAnObject,
        EventErrorCode::MissingField,
        EventErrorCode::InvalidType,
        EventErrorCode::InvalidUuid,
        EventErrorCode::AppMismatch,
        EventErrorCode::UnknownFlowVersion,
        EventErrorCode::FlowMismatch,
        EventErrorCode::InvalidLength,
        EventErrorCode::InvalidCharacter,
        EventErrorCode::InvalidPlatform,
        EventErrorCode::InvalidRendererMode,
        EventErrorCode::UnknownEventType,
        EventErrorCode::ServerOnlyEventType,
        EventErrorCode::InvalidTimestamp,
        EventErrorCode::TimestampInFuture,
        EventErrorCode::TimestampTooOld,
        EventErrorCode::InvalidNumber,
        EventErrorCode::CurrencyRequired,
        EventErrorCode::InvalidCurrency,
        EventErrorCode::PropertiesTooLarge,
    ];

    /// The stable snake_case name used in API responses.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventErrorCode::NotAnObject => "not_an_object",
            EventErrorCode::MissingField => "missing_field",
            EventErrorCode::InvalidType => "invalid_type",
            EventErrorCode::InvalidUuid => "invalid_uuid",
            EventErrorCode::AppMismatch => "app_mismatch",
            EventErrorCode::UnknownFlowVersion => "unknown_flow_version",
            EventErrorCode::FlowMismatch => "flow_mismatch",
            EventErrorCode::InvalidLength => "invalid_length",
            EventErrorCode::InvalidCharacter => "invalid_character",
            EventErrorCode::InvalidPlatform => "invalid_platform",
            EventErrorCode::InvalidRendererMode => "invalid_renderer_mode",
            EventErrorCode::UnknownEventType => "unknown_event_type",
            EventErrorCode::ServerOnlyEventType => "server_only_event_type",
            EventErrorCode::InvalidTimestamp => "invalid_timestamp",
            EventErrorCode::TimestampInFuture => "timestamp_in_future",
            EventErrorCode::TimestampTooOld => "timestamp_too_old",
            EventErrorCode::InvalidNumber => "invalid_number",
            EventErrorCode::CurrencyRequired => "currency_required",
            EventErrorCode::InvalidCurrency => "invalid_currency",
            EventErrorCode::PropertiesTooLarge => "properties_too_large",
        }
    }
}

impl std::fmt::Display for EventErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The first rule an event broke (D7). One failure rejects that event only; the endpoint turns
/// it into an `errors` item `{index, event_id, code, message}`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct EventError {
    /// Which rule failed.
    pub code: EventErrorCode,
    /// The wire name of the offending field; `None` when the event as a whole is at fault.
    pub field: Option<&'static str>,
    /// A human-readable explanation for SDK developers. It never quotes the client's values.
    pub message: String,
    /// The raw `event_id` string when the event has one that is readable (a JSON string of at
    /// most 256 characters, whether or not it is a valid UUID), so the response can name the
    /// event.
    pub event_id: Option<String>,
}

/// Validates one raw JSON event against the URL's app (D7) and returns the event to store, or
/// the first rule it breaks.
///
/// `versions` answers which flow versions exist in `app`; `now` is the server clock that the
/// `timestamp` window in `limits` is measured from. The function never panics, whatever `raw`
/// holds.
pub fn validate_event(
    raw: &Value,
    app: AppId,
    versions: &(impl FlowVersionLookup + ?Sized),
    now: OffsetDateTime,
    limits: &ValidationLimits,
) -> Result<AnalyticsEvent, EventError> {
    // D7: the body must be an object; nothing else can be read, not even an event_id.
    let Some(obj) = raw.as_object() else {
        return Err(EventError {
            code: EventErrorCode::NotAnObject,
            field: None,
            message: format!("an event must be a JSON object, got {}", kind(raw)),
            event_id: None,
        });
    };
    // The event_id is read before any check so that every later error can name the event.
    let cx = Event {
        obj,
        event_id: reported_event_id(raw),
    };

    // D7: required fields are present, non-null and strings, checked in the table's order.
    for field in EVENT_FIELDS.iter().filter(|f| f.is_required()) {
        cx.required_str(field.name())?;
    }
    // The checks below run in the order D7 lists them, each helper once per event, so the
    // first failure is the same as when they were one function.
    let ids = cx.ids()?;
    cx.check_app_and_version(app, versions, &ids)?;
    let columns = cx.texts()?;
    let device_platform = cx.vocabularies()?;
    let event_type = cx.event_type()?;
    let occurred_at = cx.timestamp(cx.required_str("timestamp")?, now, limits)?;
    cx.numbers()?;
    cx.properties()?;
    cx.stored(
        Checked {
            ids,
            device_platform,
            event_type,
            occurred_at,
        },
        columns,
    )
}

/// The setter of an optional text column of [`AnalyticsEvent`] (see `schema`'s table).
type SetColumn = fn(AnalyticsEvent, Option<String>) -> AnalyticsEvent;

/// An event's four ids, each a hyphenated UUID (D7).
struct Ids {
    event_id: EventId,
    app_id: AppId,
    flow_id: FlowId,
    flow_version_id: FlowVersionId,
}

/// What the checks of an event read into typed values, for the stored event.
struct Checked {
    ids: Ids,
    device_platform: Platform,
    event_type: EventType,
    occurred_at: OffsetDateTime,
}

impl<'a> Event<'a> {
    /// D7: the four ids are hyphenated UUIDs of any version.
    #[inline]
    fn ids(&self) -> Result<Ids, EventError> {
        // Struct fields are evaluated in the order written, so the ids are checked in D7's.
        Ok(Ids {
            event_id: EventId(self.uuid("event_id", self.required_str("event_id")?)?),
            app_id: AppId(self.uuid("app_id", self.required_str("app_id")?)?),
            flow_id: FlowId(self.uuid("flow_id", self.required_str("flow_id")?)?),
            flow_version_id: FlowVersionId(
                self.uuid("flow_version_id", self.required_str("flow_version_id")?)?,
            ),
        })
    }

    /// D7: the URL's app is authoritative, and the version must exist in this app (published
    /// or not) and belong to the event's flow, so analytics never attribute an event to another
    /// app's flow.
    #[inline]
    fn check_app_and_version(
        &self,
        app: AppId,
        versions: &(impl FlowVersionLookup + ?Sized),
        ids: &Ids,
    ) -> Result<(), EventError> {
        if ids.app_id != app {
            return Err(self.fail(
                EventErrorCode::AppMismatch,
                "app_id",
                "`app_id` must equal the app in the URL",
            ));
        }
        match versions.flow_of_version(app, ids.flow_version_id) {
            None => Err(self.fail(
                EventErrorCode::UnknownFlowVersion,
                "flow_version_id",
                "`flow_version_id` is not a flow version of this app",
            )),
            Some(owner) if owner != ids.flow_id => Err(self.fail(
                EventErrorCode::FlowMismatch,
                "flow_version_id",
                "`flow_version_id` does not belong to `flow_id`",
            )),
            Some(_) => Ok(()),
        }
    }

    /// D7: string lengths, counted in characters, and text the store can keep: the required
    /// strings first, then each optional string's type and rules, in the table's order. Returns
    /// the optional strings that have a column of their own, with the column's setter.
    #[inline]
    fn texts(&self) -> Result<Vec<(SetColumn, &'a str)>, EventError> {
        let texts = EVENT_FIELDS.iter().filter_map(|f| match f.kind() {
            FieldKind::Text { min, max } => Some((f, min, max)),
            _ => None,
        });
        for (field, min, max) in texts.clone().filter(|(f, ..)| f.is_required()) {
            self.text(field.name(), self.required_str(field.name())?, min, max)?;
        }
        let mut columns = Vec::new();
        for (field, min, max) in texts.filter(|(f, ..)| !f.is_required()) {
            if let Some(value) = self.optional_str(field.name())? {
                self.text(field.name(), value, min, max)?;
                if let Some(set) = field.set_text() {
                    columns.push((set, value));
                }
            }
        }
        Ok(columns)
    }

    /// D7: the closed vocabularies, `device_platform` (returned) and `renderer_mode`.
    #[inline]
    fn vocabularies(&self) -> Result<Platform, EventError> {
        let Some(device_platform) = Platform::parse(self.required_str("device_platform")?) else {
            return Err(self.fail(
                EventErrorCode::InvalidPlatform,
                "device_platform",
                "`device_platform` must be one of `ios`, `android`, `web`",
            ));
        };
        let renderer_mode = self.optional_str("renderer_mode")?;
        if renderer_mode.is_some_and(|mode| !RENDERER_MODES.contains(&mode)) {
            return Err(self.fail(
                EventErrorCode::InvalidRendererMode,
                "renderer_mode",
                "`renderer_mode` must be `native` or `web`",
            ));
        }
        Ok(device_platform)
    }

    /// D7: a recognized type, and never one only the server records (D8).
    #[inline]
    fn event_type(&self) -> Result<EventType, EventError> {
        match EventType::parse(self.required_str("event_type")?) {
            None => Err(self.fail(
                EventErrorCode::UnknownEventType,
                "event_type",
                "`event_type` is not a recognized event type",
            )),
            Some(t) if t.is_server_only() => Err(self.fail(
                EventErrorCode::ServerOnlyEventType,
                "event_type",
                format!("`{}` is recorded by the server only", t.as_str()),
            )),
            Some(t) => Ok(t),
        }
    }

    /// D7: numeric rules, and the currency that goes with revenue. Only the checks matter
    /// here; the values are copied into the payload unchanged by [`Event::stored`].
    #[inline]
    fn numbers(&self) -> Result<(), EventError> {
        for field in EVENT_FIELDS {
            if let FieldKind::Integer { min } = field.kind() {
                self.optional_integer(field.name(), min)?;
            }
        }
        let revenue = self.optional_number("revenue")?;
        check_revenue(revenue)
            .map_err(|message| self.fail(EventErrorCode::InvalidNumber, "revenue", message))?;
        let currency = self.optional_str("currency")?;
        if revenue.is_some() && currency.is_none() {
            return Err(self.fail(
                EventErrorCode::CurrencyRequired,
                "currency",
                "`currency` is required when `revenue` is present",
            ));
        }
        // A currency sent without revenue is still checked: a malformed value is a client bug
        // either way, and storing it would poison revenue reports later.
        if currency.is_some_and(|c| !is_currency_code(c)) {
            return Err(self.fail(
                EventErrorCode::InvalidCurrency,
                "currency",
                "`currency` must be three upper-case ASCII letters (ISO 4217)",
            ));
        }
        Ok(())
    }

    /// The stored event of a valid one. Typed columns take the identity and routing fields;
    /// every member the table keeps in the payload goes there under its wire name, and unknown
    /// members are dropped (D7: ignored, not stored).
    #[inline]
    fn stored(
        &self,
        checked: Checked,
        columns: Vec<(SetColumn, &'a str)>,
    ) -> Result<AnalyticsEvent, EventError> {
        let mut payload = Map::new();
        for field in EVENT_FIELDS.iter().filter(|f| f.kept() == Kept::Payload) {
            if let Some(value) = self.optional(field.name()) {
                payload.insert(field.name().to_owned(), value.clone());
            }
        }
        let Checked {
            ids,
            device_platform,
            event_type,
            occurred_at,
        } = checked;
        let event = AnalyticsEvent::new(
            ids.event_id,
            EventSource::Sdk,
            event_type,
            ids.app_id,
            self.required_str("user_id")?,
            self.required_str("session_id")?,
            device_platform,
            occurred_at,
        )
        .with_flow_id(Some(ids.flow_id))
        .with_flow_version_id(Some(ids.flow_version_id))
        .with_sdk_version(Some(self.required_str("sdk_version")?.to_owned()))
        .with_payload(payload);
        Ok(columns.into_iter().fold(event, |event, (set, value)| {
            set(event, Some(value.to_owned()))
        }))
    }
}

/// The event object being validated, with the `event_id` to report in errors.
struct Event<'a> {
    obj: &'a Map<String, Value>,
    event_id: Option<&'a str>,
}

impl<'a> Event<'a> {
    /// Builds the error for a failed rule, naming the event when its id was readable.
    fn fail(
        &self,
        code: EventErrorCode,
        field: &'static str,
        message: impl Into<String>,
    ) -> EventError {
        EventError {
            code,
            field: Some(field),
            message: message.into(),
            event_id: self.event_id.map(str::to_owned),
        }
    }

    fn invalid_type(&self, field: &'static str, expected: &str, got: &Value) -> EventError {
        self.fail(
            EventErrorCode::InvalidType,
            field,
            format!("`{field}` must be {expected}, got {}", kind(got)),
        )
    }

    /// A required string (D7: present, non-null, of its documented type).
    fn required_str(&self, field: &'static str) -> Result<&'a str, EventError> {
        match self.obj.get(field) {
            None | Some(Value::Null) => Err(self.fail(
                EventErrorCode::MissingField,
                field,
                format!("`{field}` is required"),
            )),
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(self.invalid_type(field, "a string", other)),
        }
    }

    /// An optional field's value; `null` counts as absent because SDKs send unset optionals as
    /// `null`.
    fn optional(&self, field: &str) -> Option<&'a Value> {
        self.obj.get(field).filter(|v| !v.is_null())
    }

    fn optional_str(&self, field: &'static str) -> Result<Option<&'a str>, EventError> {
        match self.optional(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.invalid_type(field, "a string", other)),
        }
    }

    /// An optional integer of at least `min`. Only JSON integers that fit an `i64` pass, so
    /// `1.0` is rejected: SDKs produce these counters and durations as integers, and a float
    /// there signals a bug.
    fn optional_integer(&self, field: &'static str, min: i64) -> Result<Option<i64>, EventError> {
        match self.optional(field) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(v) if v >= min => Ok(Some(v)),
                _ => Err(self.fail(
                    EventErrorCode::InvalidNumber,
                    field,
                    format!("`{field}` must be an integer of at least {min}"),
                )),
            },
            Some(other) => Err(self.invalid_type(field, "an integer", other)),
        }
    }

    /// An optional number of any kind; `Some(None)` when the number has no `f64` value.
    fn optional_number(&self, field: &'static str) -> Result<Option<Option<f64>>, EventError> {
        match self.optional(field) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(Some(n.as_f64())),
            Some(other) => Err(self.invalid_type(field, "a number", other)),
        }
    }

    /// D7: ids are UUIDs of any version in the hyphenated form only.
    fn uuid(&self, field: &'static str, s: &str) -> Result<uuid::Uuid, EventError> {
        parse_hyphenated(s).map_err(|_| {
            self.fail(
                EventErrorCode::InvalidUuid,
                field,
                format!("`{field}` must be a hyphenated UUID"),
            )
        })
    }

    /// D7: a string of `min..=max` characters that the store can keep, by the one text rule
    /// ([`super::broken_text_rule`]).
    fn text(&self, field: &'static str, value: &str, min: u64, max: u64) -> Result<(), EventError> {
        match super::broken_text_rule(value, min, max) {
            None => Ok(()),
            Some(FieldRule::Length { min, max }) => Err(self.fail(
                EventErrorCode::InvalidLength,
                field,
                format!("`{field}` must be {min} to {max} characters long"),
            )),
            Some(_) => Err(self.fail(
                EventErrorCode::InvalidCharacter,
                field,
                format!("`{field}` must not contain the NUL character (U+0000)"),
            )),
        }
    }

    /// D7: RFC 3339 with an offset, inside the configured window around `now` (both bounds
    /// inclusive).
    fn timestamp(
        &self,
        s: &str,
        now: OffsetDateTime,
        limits: &ValidationLimits,
    ) -> Result<OffsetDateTime, EventError> {
        let Ok(at) = OffsetDateTime::parse(s, &Rfc3339) else {
            return Err(self.fail(
                EventErrorCode::InvalidTimestamp,
                "timestamp",
                "`timestamp` must be an RFC 3339 date-time with an offset",
            ));
        };
        // Checked arithmetic keeps absurd configured limits from panicking; a bound that falls
        // outside the representable range cannot be crossed.
        if now
            .checked_add(limits.max_future)
            .is_some_and(|latest| at > latest)
        {
            return Err(self.fail(
                EventErrorCode::TimestampInFuture,
                "timestamp",
                "`timestamp` is too far in the future",
            ));
        }
        if now
            .checked_sub(limits.max_past)
            .is_some_and(|earliest| at < earliest)
        {
            return Err(self.fail(
                EventErrorCode::TimestampTooOld,
                "timestamp",
                "`timestamp` is too far in the past",
            ));
        }
        Ok(at)
    }

    /// D7: `properties` is an object of at most 8 KiB once serialised compactly.
    fn properties(&self) -> Result<(), EventError> {
        let props = match self.optional("properties") {
            None => return Ok(()),
            Some(Value::Object(props)) => props,
            Some(other) => return Err(self.invalid_type("properties", "an object", other)),
        };
        // Serialising into a writer that only counts measures the size without allocating the
        // serialisation; the writer fails as soon as the limit is crossed, so a huge object is
        // not walked to the end.
        let mut counter = CountingWriter {
            written: 0,
            limit: MAX_PROPERTIES_BYTES,
        };
        if serde_json::to_writer(&mut counter, props).is_err() {
            return Err(self.fail(
                EventErrorCode::PropertiesTooLarge,
                "properties",
                format!("`properties` must be at most {MAX_PROPERTIES_BYTES} bytes serialised"),
            ));
        }
        // Every key and string inside, at any depth: the store keeps `properties` as jsonb.
        // The walk is bounded by the size checked above; an explicit stack keeps deep nesting
        // off the call stack.
        let mut pending: Vec<&Value> = props.values().collect();
        let mut storable = props.keys().all(|k| super::is_storable_text(k));
        while storable {
            let Some(value) = pending.pop() else { break };
            match value {
                Value::String(s) => storable = super::is_storable_text(s),
                Value::Array(items) => pending.extend(items),
                Value::Object(members) => {
                    storable = members.keys().all(|k| super::is_storable_text(k));
                    pending.extend(members.values());
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
        if !storable {
            return Err(self.fail(
                EventErrorCode::InvalidCharacter,
                "properties",
                "`properties` must not contain the NUL character (U+0000) in a key or a string",
            ));
        }
        Ok(())
    }
}

/// The message of a `revenue` out of its range, quoting the range.
const REVENUE_RANGE: &str = "`revenue` must be a number from 0 to 1000000 inclusive (the amount \
     of one purchase in its `currency`)";

/// D7 and P18: `revenue` must be a finite number from [`MIN_REVENUE`] to [`MAX_REVENUE`].
/// `serde_json::Value` cannot normally hold NaN or infinities (the parser rejects `1e400`),
/// but a number without an `f64` value, or a build with `arbitrary_precision`, could still
/// produce one, so finiteness is checked here explicitly (NaN fails the range test too).
fn check_revenue(revenue: Option<Option<f64>>) -> Result<(), &'static str> {
    match revenue {
        None => Ok(()),
        Some(Some(v)) if (MIN_REVENUE as f64..=MAX_REVENUE as f64).contains(&v) => Ok(()),
        Some(_) => Err(REVENUE_RANGE),
    }
}

/// D7: three upper-case letters; ASCII only, matching ISO 4217 codes.
fn is_currency_code(s: &str) -> bool {
    s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase())
}

/// The JSON type of a value, for error messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An `io::Write` that discards bytes, counts them and fails once more than `limit` arrived.
struct CountingWriter {
    written: usize,
    limit: usize,
}

impl io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written = self.written.saturating_add(buf.len());
        if self.written > self.limit {
            // `ErrorKind` converts without allocating; the caller only needs to know it failed.
            return Err(io::ErrorKind::Other.into());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The longest `event_id` echoed back in an event error, in characters: a longer string is
/// certainly not a UUID and would only bloat the response.
pub const MAX_REPORTED_EVENT_ID_CHARS: usize = 256;

/// The `event_id` of a raw event to echo in its error: a string of at most
/// [`MAX_REPORTED_EVENT_ID_CHARS`] characters, UUID or not.
pub fn reported_event_id(raw: &Value) -> Option<&str> {
    raw.get("event_id")
        .and_then(Value::as_str)
        .filter(|s| s.chars().nth(MAX_REPORTED_EVENT_ID_CHARS).is_none())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::macros::datetime;
    use uuid::Uuid;

    use super::*;
    use crate::events::schema::d7::{
        OPTIONAL_INTEGERS, OPTIONAL_STRINGS, OTHER_OPTIONAL, REQUIRED_FIELDS,
    };
    use crate::events::{event_field, EventField};

    const APP: AppId = AppId(Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0a01));
    const OTHER_APP: AppId = AppId(Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0a02));
    const FLOW: FlowId = FlowId(Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0f01));
    const OTHER_FLOW: FlowId = FlowId(Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0f02));
    const VERSION: FlowVersionId =
        FlowVersionId(Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0b01));
    /// A version of `OTHER_FLOW` in the same app.
    const SIBLING_VERSION: FlowVersionId =
        FlowVersionId(Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0b02));
    /// A version that exists, but in `OTHER_APP`.
    const FOREIGN_VERSION: FlowVersionId =
        FlowVersionId(Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0b03));
    const EVENT_ID: &str = "0190a6b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b";
    const NOW: OffsetDateTime = datetime!(2025-06-01 12:00:00 UTC);

    /// A catalog with three versions: one of `FLOW`, one of a sibling flow, one of another app.
    struct Catalog;

    impl FlowVersionLookup for Catalog {
        fn flow_of_version(&self, app: AppId, version: FlowVersionId) -> Option<FlowId> {
            [
                (APP, VERSION, FLOW),
                (APP, SIBLING_VERSION, OTHER_FLOW),
                (OTHER_APP, FOREIGN_VERSION, FLOW),
            ]
            .into_iter()
            .find(|&(a, v, _)| a == app && v == version)
            .map(|(_, _, flow)| flow)
        }
    }

    /// The smallest valid event.
    fn base() -> Value {
        json!({
            "event_id": EVENT_ID,
            "app_id": APP.to_string(),
            "flow_id": FLOW.to_string(),
            "flow_version_id": VERSION.to_string(),
            "user_id": "user-1",
            "session_id": "session-1",
            "device_platform": "ios",
            "event_type": "flow_open",
            "timestamp": "2025-06-01T11:59:00Z",
            "sdk_version": "2.1.0",
        })
    }

    /// `base()` with `field` set to `value` (or removed when `value` is `None`).
    fn with(field: &str, value: Option<Value>) -> Value {
        let mut event = base();
        if let Value::Object(obj) = &mut event {
            match value {
                Some(v) => obj.insert(field.to_owned(), v),
                None => obj.remove(field),
            };
        }
        event
    }

    fn run(raw: &Value) -> Result<AnalyticsEvent, EventError> {
        validate_event(raw, APP, &Catalog, NOW, &ValidationLimits::default())
    }

    fn accepted(raw: &Value) -> AnalyticsEvent {
        match run(raw) {
            Ok(event) => event,
            Err(e) => panic!("expected the event to be accepted, got {e:?}"),
        }
    }

    fn rejected(raw: &Value) -> EventError {
        match run(raw) {
            Ok(event) => panic!("expected the event to be rejected, got {event:?}"),
            Err(e) => e,
        }
    }

    /// Asserts that `raw` is rejected with `code` on `field`.
    fn assert_rejects(raw: &Value, code: EventErrorCode, field: &str) {
        let e = rejected(raw);
        assert_eq!((e.code, e.field), (code, Some(field)), "for {raw}: {e}");
    }

    #[test]
    fn minimal_event_is_accepted() {
        let event = accepted(&base());
        assert_eq!(event.event_id.to_string(), EVENT_ID);
        assert_eq!(event.source, EventSource::Sdk);
        assert_eq!(event.event_type, EventType::FlowOpen);
        assert_eq!(event.app_id, APP);
        assert_eq!(event.flow_id, Some(FLOW));
        assert_eq!(event.flow_version_id, Some(VERSION));
        assert_eq!(event.user_id, "user-1");
        assert_eq!(event.session_id, "session-1");
        assert_eq!(event.device_platform, Platform::Ios);
        assert_eq!(event.occurred_at, datetime!(2025-06-01 11:59:00 UTC));
        assert_eq!(event.sdk_version.as_deref(), Some("2.1.0"));
        assert_eq!(event.placement_key, None);
        assert_eq!(event.experiment_id, None);
        assert_eq!(event.variant_id, None);
        assert_eq!(event.variant_name, None);
        assert_eq!(event.reason, None);
        assert!(event.payload.is_empty());
    }

    #[test]
    fn full_event_maps_every_field() {
        let mut raw = base();
        let extra = json!({
            "placement_id": "onboarding",
            "flow_version": 3,
            "experiment_id": "exp-1",
            "variant_id": "var-1",
            "variant_name": "control",
            "screen_id": "s1",
            "screen_name": "Welcome",
            "screen_index": 0,
            "element_id": "btn-next",
            "element_type": "button",
            "interaction_type": "tap",
            "revenue": 9.99,
            "currency": "EUR",
            "time_since_flow_start_ms": 1200,
            "time_on_screen_ms": 0,
            "app_version": "5.4.3",
            "country": "DE",
            "properties": {"product_id": "pro_monthly", "nested": {"a": [1, null]}},
            "renderer_mode": "web",
            "runtime_version": "rt-2025.05.1",
            "first_paint_ms": 87,
            "device_platform": "android",
            "event_type": "purchase_complete",
            "timestamp": "2025-06-01T13:59:00.123+02:00",
        });
        if let (Value::Object(obj), Value::Object(extra)) = (&mut raw, extra) {
            obj.extend(extra);
        }
        let event = accepted(&raw);
        assert_eq!(event.event_type, EventType::PurchaseComplete);
        assert_eq!(event.device_platform, Platform::Android);
        assert_eq!(event.occurred_at, datetime!(2025-06-01 13:59:00.123 +02:00));
        assert_eq!(event.placement_key.as_deref(), Some("onboarding"));
        assert_eq!(event.experiment_id.as_deref(), Some("exp-1"));
        assert_eq!(event.variant_id.as_deref(), Some("var-1"));
        assert_eq!(event.variant_name.as_deref(), Some("control"));
        assert_eq!(event.reason, None);
        let expected = json!({
            "flow_version": 3,
            "screen_id": "s1",
            "screen_name": "Welcome",
            "screen_index": 0,
            "element_id": "btn-next",
            "element_type": "button",
            "interaction_type": "tap",
            "revenue": 9.99,
            "currency": "EUR",
            "time_since_flow_start_ms": 1200,
            "time_on_screen_ms": 0,
            "app_version": "5.4.3",
            "country": "DE",
            "properties": {"product_id": "pro_monthly", "nested": {"a": [1, null]}},
            "renderer_mode": "web",
            "runtime_version": "rt-2025.05.1",
            "first_paint_ms": 87,
        });
        assert_eq!(Value::Object(event.payload), expected);
    }

    #[test]
    fn unknown_top_level_fields_are_ignored() {
        let event = accepted(&with(
            "sdk_feature_from_the_future",
            Some(json!({"x": [1, 2]})),
        ));
        assert!(event.payload.is_empty());
    }

    #[test]
    fn null_optional_fields_count_as_absent() {
        let mut raw = base();
        let optional = OPTIONAL_STRINGS
            .iter()
            .chain(OPTIONAL_INTEGERS.iter().map(|(f, _)| f))
            .chain(&OTHER_OPTIONAL);
        if let Value::Object(obj) = &mut raw {
            for field in optional {
                obj.insert((*field).to_owned(), Value::Null);
            }
        }
        let event = accepted(&raw);
        assert_eq!(event.placement_key, None);
        assert_eq!(event.experiment_id, None);
        assert!(event.payload.is_empty());
        // A null revenue is absent, so no currency is required.
        accepted(&with("revenue", Some(Value::Null)));
    }

    #[test]
    fn rejects_non_objects() {
        for raw in [
            json!([base()]),
            json!("event"),
            json!(null),
            json!(42),
            json!(true),
        ] {
            let e = rejected(&raw);
            assert_eq!(e.code, EventErrorCode::NotAnObject);
            assert_eq!((e.field, e.event_id), (None, None));
        }
    }

    #[test]
    fn rejects_missing_or_null_required_fields() {
        for field in REQUIRED_FIELDS {
            assert_rejects(&with(field, None), EventErrorCode::MissingField, field);
            assert_rejects(
                &with(field, Some(Value::Null)),
                EventErrorCode::MissingField,
                field,
            );
        }
    }

    #[test]
    fn rejects_required_fields_of_wrong_type() {
        for field in REQUIRED_FIELDS {
            for value in [json!(1), json!(true), json!(["x"]), json!({"x": 1})] {
                assert_rejects(
                    &with(field, Some(value)),
                    EventErrorCode::InvalidType,
                    field,
                );
            }
        }
    }

    #[test]
    fn rejects_malformed_uuids() {
        let bad = [
            "",
            "not-a-uuid",
            "0190a6b23c4d7e8f9a0b1c2d3e4f5a6b",
            "{0190a6b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b}",
            "urn:uuid:0190a6b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b",
            "0190a6b2-3c4d-7e8f-9a0b-1c2d3e4f5a6",
            "0190a6b2-3c4d-7e8f-9a0b-1c2d3e4f5a6g",
            " 0190a6b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b",
        ];
        for field in ["event_id", "app_id", "flow_id", "flow_version_id"] {
            for value in bad {
                assert_rejects(
                    &with(field, Some(json!(value))),
                    EventErrorCode::InvalidUuid,
                    field,
                );
            }
        }
    }

    #[test]
    fn accepts_uuids_of_any_version_and_case() {
        for id in [
            "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
            "550e8400-e29b-41d4-a716-446655440000",
            "0190A6B2-3C4D-7E8F-9A0B-1C2D3E4F5A6B",
            "00000000-0000-0000-0000-000000000000",
        ] {
            let event = accepted(&with("event_id", Some(json!(id))));
            assert_eq!(event.event_id.to_string(), id.to_ascii_lowercase());
        }
    }

    #[test]
    fn rejects_app_mismatch() {
        assert_rejects(
            &with("app_id", Some(json!(OTHER_APP.to_string()))),
            EventErrorCode::AppMismatch,
            "app_id",
        );
    }

    #[test]
    fn rejects_unknown_flow_version() {
        // A version nobody has, and one that exists but in another app.
        for version in [FlowVersionId(Uuid::from_u128(7)), FOREIGN_VERSION] {
            assert_rejects(
                &with("flow_version_id", Some(json!(version.to_string()))),
                EventErrorCode::UnknownFlowVersion,
                "flow_version_id",
            );
        }
    }

    #[test]
    fn rejects_version_of_another_flow() {
        assert_rejects(
            &with("flow_version_id", Some(json!(SIBLING_VERSION.to_string()))),
            EventErrorCode::FlowMismatch,
            "flow_version_id",
        );
        assert_rejects(
            &with("flow_id", Some(json!(OTHER_FLOW.to_string()))),
            EventErrorCode::FlowMismatch,
            "flow_version_id",
        );
    }

    #[test]
    fn user_and_session_ids_are_1_to_256_characters() {
        for field in ["user_id", "session_id"] {
            assert_rejects(
                &with(field, Some(json!(""))),
                EventErrorCode::InvalidLength,
                field,
            );
            assert_rejects(
                &with(field, Some(json!("a".repeat(257)))),
                EventErrorCode::InvalidLength,
                field,
            );
            accepted(&with(field, Some(json!("a"))));
            // 256 characters of 4 bytes each: the limit counts characters, not bytes.
            accepted(&with(field, Some(json!("🦀".repeat(256)))));
            assert_rejects(
                &with(field, Some(json!("🦀".repeat(257)))),
                EventErrorCode::InvalidLength,
                field,
            );
        }
    }

    #[test]
    fn sdk_version_is_1_to_64_characters() {
        assert_rejects(
            &with("sdk_version", Some(json!(""))),
            EventErrorCode::InvalidLength,
            "sdk_version",
        );
        assert_rejects(
            &with("sdk_version", Some(json!("1".repeat(65)))),
            EventErrorCode::InvalidLength,
            "sdk_version",
        );
        accepted(&with("sdk_version", Some(json!("é".repeat(64)))));
    }

    #[test]
    fn optional_strings_are_at_most_256_characters() {
        for field in OPTIONAL_STRINGS {
            accepted(&with(field, Some(json!(""))));
            accepted(&with(field, Some(json!("ü".repeat(256)))));
            assert_rejects(
                &with(field, Some(json!("x".repeat(257)))),
                EventErrorCode::InvalidLength,
                field,
            );
        }
    }

    #[test]
    fn strings_with_a_nul_character_are_rejected() {
        // PostgreSQL refuses U+0000 in text: such an event would hold its batch forever.
        let required = ["user_id", "session_id", "sdk_version"];
        for field in required.into_iter().chain(OPTIONAL_STRINGS) {
            for bad in ["\0", "a\0b", "end\0"] {
                assert_rejects(
                    &with(field, Some(json!(bad))),
                    EventErrorCode::InvalidCharacter,
                    field,
                );
            }
            // Other control characters are text PostgreSQL keeps.
            accepted(&with(field, Some(json!("a\u{1}\tb"))));
        }
        // The length rule still comes first.
        assert_rejects(
            &with("user_id", Some(json!("\0".repeat(257)))),
            EventErrorCode::InvalidLength,
            "user_id",
        );
    }

    #[test]
    fn properties_with_a_nul_character_are_rejected() {
        for bad in [
            json!({"k\0": 1}),
            json!({"k": "v\0"}),
            json!({"k": ["a", {"b": [null, "\0"]}]}),
            json!({"k": {"deep": {"x\0y": true}}}),
        ] {
            assert_rejects(
                &with("properties", Some(bad)),
                EventErrorCode::InvalidCharacter,
                "properties",
            );
        }
        let fine = json!({"k": ["a", {"b": [null, 1.5, "\u{1}"]}], "e": {}});
        let event = accepted(&with("properties", Some(fine.clone())));
        assert_eq!(event.payload.get("properties"), Some(&fine));
        // Unknown top-level fields are not stored, so they are not checked either (D7).
        accepted(&with("unknown", Some(json!("\0"))));
    }

    #[test]
    fn optional_strings_must_be_strings() {
        for field in OPTIONAL_STRINGS
            .iter()
            .chain(&["renderer_mode", "currency"])
        {
            for value in [json!(1), json!(false), json!(["a"]), json!({})] {
                assert_rejects(
                    &with(field, Some(value)),
                    EventErrorCode::InvalidType,
                    field,
                );
            }
        }
    }

    #[test]
    fn rejects_unknown_platform() {
        for platform in ["", "iOS", "IOS", "macos", "windows", " web"] {
            assert_rejects(
                &with("device_platform", Some(json!(platform))),
                EventErrorCode::InvalidPlatform,
                "device_platform",
            );
        }
        for (name, platform) in [
            ("ios", Platform::Ios),
            ("android", Platform::Android),
            ("web", Platform::Web),
        ] {
            assert_eq!(
                accepted(&with("device_platform", Some(json!(name)))).device_platform,
                platform
            );
        }
    }

    #[test]
    fn rejects_unknown_renderer_mode() {
        for mode in ["", "Native", "hybrid", "webview"] {
            assert_rejects(
                &with("renderer_mode", Some(json!(mode))),
                EventErrorCode::InvalidRendererMode,
                "renderer_mode",
            );
        }
        for mode in ["native", "web"] {
            let event = accepted(&with("renderer_mode", Some(json!(mode))));
            assert_eq!(event.payload.get("renderer_mode"), Some(&json!(mode)));
        }
    }

    #[test]
    fn rejects_unknown_event_type() {
        for name in ["", "flow_opened", "FLOW_OPEN", "flow_open ", "resolve"] {
            assert_rejects(
                &with("event_type", Some(json!(name))),
                EventErrorCode::UnknownEventType,
                "event_type",
            );
        }
    }

    #[test]
    fn rejects_server_only_event_type() {
        assert_rejects(
            &with("event_type", Some(json!("resolve_no_flow"))),
            EventErrorCode::ServerOnlyEventType,
            "event_type",
        );
    }

    #[test]
    fn accepts_every_sdk_event_type() {
        for &t in EventType::SDK_TYPES {
            assert_eq!(
                accepted(&with("event_type", Some(json!(t.as_str())))).event_type,
                t
            );
        }
    }

    #[test]
    fn rejects_timestamps_that_are_not_rfc3339_with_offset() {
        for ts in [
            "",
            "2025-06-01T11:59:00",
            "2025-06-01T11:59:00.5",
            "2025-06-01",
            "11:59:00Z",
            "1748779140",
            "Sun, 01 Jun 2025 11:59:00 +0000",
            "2025-06-01T11:59:00+0000",
            "2025-06-01T11:59:00 UTC",
            "2025-06-01T11:59Z",
            "2025-13-01T11:59:00Z",
            "2025-06-31T11:59:00Z",
            "2025-06-01T24:00:00Z",
            "+2025-06-01T11:59:00Z",
        ] {
            assert_rejects(
                &with("timestamp", Some(json!(ts))),
                EventErrorCode::InvalidTimestamp,
                "timestamp",
            );
        }
        // RFC 3339 puts no bound on fraction digits; the parser keeps nanoseconds.
        let long_fraction = format!("2025-06-01T11:59:00.{}Z", "9".repeat(1000));
        let event = accepted(&with("timestamp", Some(json!(long_fraction))));
        assert_eq!(
            event.occurred_at,
            datetime!(2025-06-01 11:59:00.999_999_999 UTC)
        );
        // Other offsets and fractional seconds are fine.
        let event = accepted(&with(
            "timestamp",
            Some(json!("2025-06-01T07:29:00.123456-04:30")),
        ));
        assert_eq!(event.occurred_at, datetime!(2025-06-01 11:59:00.123456 UTC));
    }

    #[test]
    fn future_bound_is_inclusive() {
        let at_limit = with("timestamp", Some(json!("2025-06-02T12:00:00Z")));
        assert_eq!(accepted(&at_limit).occurred_at, NOW + Duration::hours(24));
        // The same instant written with another offset is still exactly at the limit.
        accepted(&with("timestamp", Some(json!("2025-06-02T14:00:00+02:00"))));
        for past_limit in [
            "2025-06-02T12:00:00.001Z",
            "2025-06-02T12:00:00.000000001Z",
            "2025-06-02T12:00:01Z",
        ] {
            assert_rejects(
                &with("timestamp", Some(json!(past_limit))),
                EventErrorCode::TimestampInFuture,
                "timestamp",
            );
        }
    }

    #[test]
    fn past_bound_is_inclusive() {
        let at_limit = with("timestamp", Some(json!("2025-05-01T12:00:00Z")));
        assert_eq!(accepted(&at_limit).occurred_at, NOW - Duration::days(31));
        for past_limit in [
            "2025-05-01T11:59:59.999Z",
            "2025-05-01T11:59:59.999999999Z",
            "1970-01-01T00:00:00Z",
        ] {
            assert_rejects(
                &with("timestamp", Some(json!(past_limit))),
                EventErrorCode::TimestampTooOld,
                "timestamp",
            );
        }
    }

    #[test]
    fn timestamp_limits_are_configurable() {
        let limits = ValidationLimits {
            max_future: Duration::minutes(5),
            max_past: Duration::hours(1),
        };
        let check = |ts: &str| {
            validate_event(
                &with("timestamp", Some(json!(ts))),
                APP,
                &Catalog,
                NOW,
                &limits,
            )
            .map_err(|e| e.code)
        };
        assert!(check("2025-06-01T12:05:00Z").is_ok());
        assert_eq!(
            check("2025-06-01T12:05:01Z").err(),
            Some(EventErrorCode::TimestampInFuture)
        );
        assert!(check("2025-06-01T11:00:00Z").is_ok());
        assert_eq!(
            check("2025-06-01T10:59:59Z").err(),
            Some(EventErrorCode::TimestampTooOld)
        );
        // Limits too large to add to the clock cannot be crossed and must not panic.
        let huge = ValidationLimits {
            max_future: Duration::MAX,
            max_past: Duration::MAX,
        };
        let far = with("timestamp", Some(json!("9999-12-31T23:59:59Z")));
        assert!(validate_event(&far, APP, &Catalog, NOW, &huge).is_ok());
        let ancient = with("timestamp", Some(json!("0000-01-01T00:00:00Z")));
        assert!(validate_event(&ancient, APP, &Catalog, NOW, &huge).is_ok());
    }

    #[test]
    fn flow_version_is_an_integer_of_at_least_1() {
        accepted(&with("flow_version", Some(json!(1))));
        for bad in [
            json!(0),
            json!(-1),
            json!(1.0),
            json!(1.5),
            json!(u64::MAX),
            json!(1e20),
        ] {
            assert_rejects(
                &with("flow_version", Some(bad)),
                EventErrorCode::InvalidNumber,
                "flow_version",
            );
        }
        assert_rejects(
            &with("flow_version", Some(json!("1"))),
            EventErrorCode::InvalidType,
            "flow_version",
        );
    }

    #[test]
    fn screen_index_and_durations_are_non_negative_integers() {
        for field in [
            "screen_index",
            "time_since_flow_start_ms",
            "time_on_screen_ms",
            "first_paint_ms",
        ] {
            accepted(&with(field, Some(json!(0))));
            let event = accepted(&with(field, Some(json!(i64::MAX))));
            assert_eq!(event.payload.get(field), Some(&json!(i64::MAX)));
            for bad in [
                json!(-1),
                json!(i64::MIN),
                json!(0.0),
                json!(2.5),
                json!(u64::MAX),
            ] {
                assert_rejects(
                    &with(field, Some(bad)),
                    EventErrorCode::InvalidNumber,
                    field,
                );
            }
            for bad in [json!("0"), json!(true), json!([0])] {
                assert_rejects(&with(field, Some(bad)), EventErrorCode::InvalidType, field);
            }
        }
    }

    /// A purchase of `revenue` in USD.
    fn purchase(revenue: Value) -> Value {
        let mut raw = with("revenue", Some(revenue));
        if let Value::Object(obj) = &mut raw {
            obj.insert("event_type".into(), json!("purchase_complete"));
            obj.insert("currency".into(), json!("USD"));
        }
        raw
    }

    #[test]
    fn revenue_must_be_a_finite_number() {
        // `serde_json::Value` cannot hold a non-finite number, so the rule is exercised on the
        // helper that enforces it.
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(check_revenue(Some(Some(v))), Err(REVENUE_RANGE), "{v}");
        }
        assert!(check_revenue(Some(None)).is_err());
        assert!(check_revenue(Some(Some(0.0))).is_ok());
        assert!(check_revenue(None).is_ok());
        // ... and the parser in front of the validator refuses overflowing literals.
        assert!(serde_json::from_str::<Value>(r#"{"revenue": 1e400}"#).is_err());
        for revenue in [json!("9.99"), json!("NaN"), json!(true)] {
            assert_rejects(
                &with("revenue", Some(revenue)),
                EventErrorCode::InvalidType,
                "revenue",
            );
        }
    }

    #[test]
    fn revenue_is_bounded_to_one_purchases_range() {
        // Issue 49: one such event made its variant's revenue sum and mean `null` in the
        // results and the other variant's comparison `zero_variance`. Each is refused with
        // `invalid_number` on `revenue`, and the message quotes the accepted range.
        for revenue in [
            json!(f64::MAX),
            json!(1.7e308),
            json!(-1e308),
            json!(-5000),
            json!(-0.01),
            json!(1_000_000.01),
            json!(1_000_001),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1e300),
        ] {
            let raw = purchase(revenue.clone());
            let e = rejected(&raw);
            assert_eq!(
                (e.code, e.field),
                (EventErrorCode::InvalidNumber, Some("revenue")),
                "for {revenue}: {e}"
            );
            assert_eq!(e.code.as_str(), "invalid_number");
            assert!(
                e.message.contains("from 0 to 1000000 inclusive"),
                "the message quotes the range: {}",
                e.message
            );
            assert_eq!(e.event_id.as_deref(), Some(EVENT_ID));
        }
        // The range is the schema's, as the message and the API document say.
        assert_eq!((MIN_REVENUE, MAX_REVENUE), (0, 1_000_000));
        assert!(REVENUE_RANGE.contains(&format!("from {MIN_REVENUE} to {MAX_REVENUE} inclusive")));
        // Both ends and everything between are accepted, on a purchase or any other event.
        for revenue in [
            json!(0),
            json!(0.0),
            json!(-0.0),
            json!(0.01),
            json!(4.99),
            json!(999_999.99),
            json!(1_000_000),
            json!(1_000_000.0),
            json!(1e6),
        ] {
            let event = accepted(&purchase(revenue.clone()));
            assert_eq!(event.payload.get("revenue"), Some(&revenue));
            let mut raw = with("revenue", Some(revenue));
            if let Value::Object(obj) = &mut raw {
                obj.insert("currency".into(), json!("EUR"));
            }
            accepted(&raw);
        }
    }

    #[test]
    fn revenue_requires_currency() {
        for revenue in [json!(0), json!(4.99), json!(1_000_000)] {
            assert_rejects(
                &with("revenue", Some(revenue.clone())),
                EventErrorCode::CurrencyRequired,
                "currency",
            );
            let mut raw = with("revenue", Some(revenue));
            if let Value::Object(obj) = &mut raw {
                obj.insert("currency".into(), Value::Null);
            }
            assert_rejects(&raw, EventErrorCode::CurrencyRequired, "currency");
        }
    }

    #[test]
    fn currency_is_three_upper_case_ascii_letters() {
        for currency in [
            "usd",
            "Usd",
            "US",
            "USDD",
            "",
            "U5D",
            "ÜSD",
            "ＵＳＤ",
            " USD",
        ] {
            // With and without revenue: a malformed currency is rejected either way.
            let mut raw = with("currency", Some(json!(currency)));
            assert_rejects(&raw, EventErrorCode::InvalidCurrency, "currency");
            if let Value::Object(obj) = &mut raw {
                obj.insert("revenue".into(), json!(1));
            }
            assert_rejects(&raw, EventErrorCode::InvalidCurrency, "currency");
        }
        let event = accepted(&with("currency", Some(json!("JPY"))));
        assert_eq!(event.payload.get("currency"), Some(&json!("JPY")));
    }

    #[test]
    fn properties_must_be_an_object() {
        for bad in [json!([]), json!("{}"), json!(1), json!(true)] {
            assert_rejects(
                &with("properties", Some(bad)),
                EventErrorCode::InvalidType,
                "properties",
            );
        }
        let event = accepted(&with("properties", Some(json!({}))));
        assert_eq!(event.payload.get("properties"), Some(&json!({})));
    }

    #[test]
    fn properties_are_at_most_8_kib_serialised() {
        // `{"k":"…"}` serialises to the value's length plus 8 bytes.
        let exact = json!({"k": "x".repeat(MAX_PROPERTIES_BYTES - 8)});
        assert_eq!(
            serde_json::to_vec(&exact).map(|v| v.len()).ok(),
            Some(MAX_PROPERTIES_BYTES)
        );
        accepted(&with("properties", Some(exact)));
        let over = json!({"k": "x".repeat(MAX_PROPERTIES_BYTES - 7)});
        assert_rejects(
            &with("properties", Some(over)),
            EventErrorCode::PropertiesTooLarge,
            "properties",
        );
        // Escapes and multi-byte characters count as the bytes they serialise to.
        let escaped = json!({"k": "\n".repeat(MAX_PROPERTIES_BYTES / 2)});
        assert_rejects(
            &with("properties", Some(escaped)),
            EventErrorCode::PropertiesTooLarge,
            "properties",
        );
        let wide = json!({"k": "é".repeat(MAX_PROPERTIES_BYTES / 2)});
        assert_rejects(
            &with("properties", Some(wide)),
            EventErrorCode::PropertiesTooLarge,
            "properties",
        );
        // A very large object is rejected too (the counter stops at the limit).
        let huge: Map<String, Value> = (0..50_000).map(|i| (format!("key{i}"), json!(i))).collect();
        assert_rejects(
            &with("properties", Some(Value::Object(huge))),
            EventErrorCode::PropertiesTooLarge,
            "properties",
        );
    }

    #[test]
    fn counting_writer_counts_and_stops_at_the_limit() {
        let mut counter = CountingWriter {
            written: 0,
            limit: 10,
        };
        assert!(serde_json::to_writer(&mut counter, &json!({"a": 1})).is_ok());
        assert_eq!(counter.written, 7);
        assert!(serde_json::to_writer(&mut counter, &json!("abc")).is_err());
    }

    #[test]
    fn errors_report_the_readable_event_id() {
        let e = rejected(&with("user_id", None));
        assert_eq!(e.event_id.as_deref(), Some(EVENT_ID));
        // A malformed id is still reported as sent, so the client can find the event.
        let e = rejected(&with("event_id", Some(json!("abc"))));
        assert_eq!(
            (e.code, e.event_id.as_deref()),
            (EventErrorCode::InvalidUuid, Some("abc"))
        );
        // Ids that are not strings, or absurdly long ones, are not echoed.
        assert_eq!(rejected(&with("event_id", Some(json!(12)))).event_id, None);
        assert_eq!(
            rejected(&with("event_id", Some(json!("a".repeat(257))))).event_id,
            None
        );
        assert_eq!(rejected(&with("event_id", None)).event_id, None);
    }

    #[test]
    fn first_failure_in_rule_order_wins() {
        let mut raw = base();
        if let Value::Object(obj) = &mut raw {
            obj.insert("app_id".into(), json!("nope"));
            obj.insert("device_platform".into(), json!("symbian"));
            obj.insert("properties".into(), json!(1));
        }
        // A later missing field still beats an earlier malformed id: presence comes first.
        let mut missing = raw.clone();
        if let Value::Object(obj) = &mut missing {
            obj.remove("sdk_version");
        }
        assert_rejects(&missing, EventErrorCode::MissingField, "sdk_version");
        assert_rejects(&raw, EventErrorCode::InvalidUuid, "app_id");
        if let Value::Object(obj) = &mut raw {
            obj.insert("app_id".into(), json!(APP.to_string()));
        }
        assert_rejects(&raw, EventErrorCode::InvalidPlatform, "device_platform");
        if let Value::Object(obj) = &mut raw {
            obj.insert("device_platform".into(), json!("web"));
        }
        assert_rejects(&raw, EventErrorCode::InvalidType, "properties");
    }

    #[test]
    fn garbage_is_rejected_without_panicking() {
        let garbage = [
            json!(null),
            json!([]),
            json!([[[[null]]]]),
            json!({}),
            json!({"event_id": null, "app_id": [null], "flow_id": {"a": {"b": null}}}),
            json!({"event_id": [EVENT_ID]}),
            json!({"event_id": u64::MAX, "timestamp": -1}),
            json!({"event_id": "\u{0}\u{ffff}", "user_id": "\u{1F980}"}),
            with("timestamp", Some(json!("1e400"))),
            with("timestamp", Some(json!("99999-12-31T23:59:59Z"))),
            with("timestamp", Some(json!("2025-06-01T11:59:00+99:99"))),
            with("timestamp", Some(json!("2025-06-01T11:59:60Z"))),
            with("flow_version", Some(json!(1e300))),
            with("flow_version", Some(json!("1e400"))),
            with("revenue", Some(json!("1e400"))),
            with("revenue", Some(json!(-1e308))),
            with("screen_index", Some(json!(i64::MIN))),
            with("properties", Some(json!([{"a": null}]))),
            with("currency", Some(json!("\u{0}\u{0}\u{0}"))),
            with("event_type", Some(json!("\u{202e}flow_open"))),
            with("user_id", Some(json!("x".repeat(1 << 20)))),
        ];
        for raw in &garbage {
            assert!(run(raw).is_err(), "accepted garbage: {raw}");
        }
        // Deeply nested values (as deep as serde_json's parser allows) inside an ignored field
        // and inside properties do not upset the validator either.
        let mut deep = json!(null);
        for _ in 0..100 {
            deep = json!([deep]);
        }
        accepted(&with("unknown", Some(deep.clone())));
        assert!(run(&with("properties", Some(json!({"deep": deep})))).is_ok());
    }

    #[test]
    fn codes_are_stable_unique_snake_case() {
        let names: Vec<&str> = EventErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), 20);
        for (i, name) in names.iter().enumerate() {
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
            assert!(!names[..i].contains(name), "duplicate {name}");
        }
        let e = rejected(&with("user_id", None));
        assert_eq!(e.to_string(), "missing_field: `user_id` is required");
        let as_error: &dyn std::error::Error = &e;
        assert!(as_error.source().is_none());
    }

    #[test]
    fn default_limits_follow_d7() {
        let limits = ValidationLimits::default();
        assert_eq!(limits.max_future, Duration::hours(24));
        assert_eq!(limits.max_past, Duration::days(31));
    }

    #[test]
    fn lookup_works_through_a_trait_object() {
        let lookup: &dyn FlowVersionLookup = &Catalog;
        assert!(validate_event(&base(), APP, lookup, NOW, &ValidationLimits::default()).is_ok());
    }

    #[test]
    fn the_typed_columns_and_the_payload_split_as_d7_stores_them() {
        let kept = |name| event_field(name).map(EventField::kept);
        for (name, column) in [
            ("placement_id", "placement_key"),
            ("experiment_id", "experiment_id"),
            ("variant_id", "variant_id"),
            ("variant_name", "variant_name"),
            ("timestamp", "occurred_at"),
        ] {
            assert_eq!(kept(name), Some(Kept::Column(column)), "{name}");
        }
        for name in OPTIONAL_STRINGS[4..]
            .iter()
            .chain(OPTIONAL_INTEGERS.iter().map(|(f, _)| f))
            .chain(&OTHER_OPTIONAL)
        {
            assert_eq!(kept(name), Some(Kept::Payload), "{name}");
        }
        // Every optional column reaches its typed field.
        let mut raw = base();
        for name in [
            "placement_id",
            "experiment_id",
            "variant_id",
            "variant_name",
        ] {
            raw[name] = json!(format!("{name}-value"));
        }
        let event = accepted(&raw);
        assert_eq!(
            [
                event.placement_key.as_deref(),
                event.experiment_id.as_deref(),
                event.variant_id.as_deref(),
                event.variant_name.as_deref()
            ],
            [
                Some("placement_id-value"),
                Some("experiment_id-value"),
                Some("variant_id-value"),
                Some("variant_name-value")
            ]
        );
        assert!(event.payload.is_empty(), "{:?}", event.payload);
    }

    #[test]
    fn every_member_of_the_table_is_checked_for_its_type() {
        // A member added to the table is validated without another change: a value of the
        // wrong JSON type is refused, naming the member.
        for field in EVENT_FIELDS {
            let wrong = match field.kind() {
                FieldKind::Object { .. } => json!("not an object"),
                FieldKind::Integer { .. } | FieldKind::Number { .. } => json!("1"),
                _ => json!(1),
            };
            assert_rejects(
                &with(field.name(), Some(wrong)),
                EventErrorCode::InvalidType,
                field.name(),
            );
        }
    }

    #[test]
    fn a_reported_event_id_is_at_most_256_characters() {
        let id = |s: String| serde_json::json!({ "event_id": s });
        assert_eq!(
            reported_event_id(&id("é".repeat(256))).map(|s| s.chars().count()),
            Some(256),
            "characters, not bytes"
        );
        assert_eq!(reported_event_id(&id("a".repeat(257))), None);
        assert_eq!(reported_event_id(&serde_json::json!({"event_id": 7})), None);
    }
}
