//! Analytics events: the recognized types (D7), the members of an SDK event in one table
//! ([`EVENT_FIELDS`]), the stored event model shared by SDK events and the server's
//! `resolve_no_flow` event (D8), and per-event validation.

mod schema;
mod validate;

use std::fmt;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::identity::Platform;
use crate::ids::{AppId, EventId, FlowId, FlowVersionId};

#[cfg(test)]
pub(crate) use schema::event_field;
pub use schema::{
    broken_text_rule, EventField, FieldKind, FieldRule, Kept, EVENT_FIELDS, IDENTITY_TEXT,
    MAX_REVENUE, MAX_SDK_VERSION_CHARS, MAX_TEXT_CHARS, MIN_REVENUE,
};
pub use validate::{
    reported_event_id, validate_event, EventError, EventErrorCode, FlowVersionLookup,
    ValidationLimits, MAX_REPORTED_EVENT_ID_CHARS,
};

/// Whether `s` can be stored as an event's text: it holds no NUL character (U+0000).
///
/// PostgreSQL's `text` cannot hold a NUL byte and its `jsonb` refuses the `\u0000` escape, so
/// an event carrying one would be refused by the store on every retry: the batch holding it,
/// and the accepted events beside it, would never be stored (D7: an accepted event must reach
/// the store). Every string that reaches an event is therefore checked at the edge: the SDK
/// event's strings and `properties` (`invalid_character`), and the resolve identity that the
/// server's `resolve_no_flow` event copies (D8; a 400 `validation_failed`).
pub fn is_storable_text(s: &str) -> bool {
    !s.as_bytes().contains(&0)
}

macro_rules! event_types {
    ($($variant:ident => $name:literal),+ $(,)?) => {
        /// A recognized analytics event type (D7). The list is part of the API: adding a
        /// type is backwards compatible, removing one is not.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum EventType {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )+
            /// `resolve_no_flow`: recorded by the server only (D8); an SDK event with this type
            /// is rejected.
            ResolveNoFlow,
        }

        impl EventType {
            /// The types an SDK may send, in the order D7 lists them.
            pub const SDK_TYPES: &'static [EventType] = &[$(EventType::$variant),+];

            /// The wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventType::$variant => $name,)+
                    EventType::ResolveNoFlow => "resolve_no_flow",
                }
            }

            /// Parses any recognized name, the server-only one included.
            pub fn parse(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(EventType::$variant),)+
                    "resolve_no_flow" => Some(EventType::ResolveNoFlow),
                    _ => None,
                }
            }
        }
    };
}

event_types! {
    FlowLoadStart => "flow_load_start",
    FlowLoadComplete => "flow_load_complete",
    FlowLoadFail => "flow_load_fail",
    FlowOpen => "flow_open",
    ScreenView => "screen_view",
    ScreenComplete => "screen_complete",
    ElementInteraction => "element_interaction",
    FormSubmit => "form_submit",
    LinkOpen => "link_open",
    PermissionRequest => "permission_request",
    PermissionResult => "permission_result",
    PurchaseStart => "purchase_start",
    PurchaseComplete => "purchase_complete",
    PurchaseFail => "purchase_fail",
    PurchaseCancel => "purchase_cancel",
    RestoreStart => "restore_start",
    RestoreComplete => "restore_complete",
    FlowComplete => "flow_complete",
    FlowDismiss => "flow_dismiss",
    Custom => "custom",
}

impl EventType {
    /// True for types only the server records (D7: an SDK event of such a type is rejected).
    pub const fn is_server_only(self) -> bool {
        matches!(self, EventType::ResolveNoFlow)
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for EventType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for EventType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        EventType::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown event type `{name}`")))
    }
}

/// Who produced an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventSource {
    /// Sent by an SDK through the events endpoint.
    Sdk,
    /// Recorded by the service itself (D8).
    Server,
}

impl EventSource {
    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventSource::Sdk => "sdk",
            EventSource::Server => "server",
        }
    }
}

/// Why a resolve served no flow (D8). Carried by the resolver's outcome so adapters record
/// `resolve_no_flow` without re-deriving it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NoFlowReason {
    /// The placement key is not in the app (D3.1).
    UnknownPlacement,
    /// No rule decided and the placement has no default flow (D3.3).
    NoRuleMatched,
    /// The user was assigned a holdout variant of an experiment (D3.2).
    Holdout,
    /// The target flow has no published version (D3.4).
    FlowUnpublished,
}

impl NoFlowReason {
    /// The stable snake_case name (D8).
    pub const fn as_str(self) -> &'static str {
        match self {
            NoFlowReason::UnknownPlacement => "unknown_placement",
            NoFlowReason::NoRuleMatched => "no_rule_matched",
            NoFlowReason::Holdout => "holdout",
            NoFlowReason::FlowUnpublished => "flow_unpublished",
        }
    }
}

impl fmt::Display for NoFlowReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One analytics event as it is stored: an accepted SDK event (D7) or a server
/// `resolve_no_flow` event (D8). Identity and routing fields are typed columns; the remaining
/// optional SDK fields travel in `payload`.
///
/// Its JSON is the body of the bus messages and of the dead letters, formats that outlive a
/// process (D26): the deserializer ignores members it does not know (never
/// `deny_unknown_fields`: a later release may add optional ones) and every optional member
/// has `#[serde(default)]`, so that one missing reads as absent. A new optional field must
/// carry `#[serde(default)]` too.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AnalyticsEvent {
    /// Unique id: the SDK's `event_id`, or a server-generated UUIDv7 (D8). Storage is
    /// idempotent on it (D7).
    pub event_id: EventId,
    /// Who produced the event.
    pub source: EventSource,
    /// The event type.
    pub event_type: EventType,
    /// The app (for SDK events, the URL's app, which the body had to match).
    pub app_id: AppId,
    /// The flow; always set on SDK events, unset on `resolve_no_flow`.
    #[serde(default)]
    pub flow_id: Option<FlowId>,
    /// The flow version; always set on SDK events, unset on `resolve_no_flow`.
    #[serde(default)]
    pub flow_version_id: Option<FlowVersionId>,
    /// The placement: the SDK's optional `placement_id`, or the resolved key (D8).
    #[serde(default)]
    pub placement_key: Option<String>,
    /// Stable user identifier.
    pub user_id: String,
    /// Session identifier.
    pub session_id: String,
    /// Device platform.
    pub device_platform: Platform,
    /// When it happened: the SDK's `timestamp`, or the server time (D8).
    #[serde(with = "time::serde::rfc3339")]
    pub occurred_at: OffsetDateTime,
    /// The SDK's `sdk_version`; unset on server events.
    #[serde(default)]
    pub sdk_version: Option<String>,
    /// Experiment fields: from the SDK event, or set on a holdout `resolve_no_flow` (D8).
    #[serde(default)]
    pub experiment_id: Option<String>,
    /// See `experiment_id`.
    #[serde(default)]
    pub variant_id: Option<String>,
    /// See `experiment_id`.
    #[serde(default)]
    pub variant_name: Option<String>,
    /// Why no flow was served; only on `resolve_no_flow` (D8).
    #[serde(default)]
    pub reason: Option<NoFlowReason>,
    /// The other validated optional SDK fields (`screen_id`, `revenue`, `properties`, ...),
    /// under their wire names. Empty for server events.
    #[serde(default)]
    pub payload: serde_json::Map<String, serde_json::Value>,
}

/// The test event: one builder for the tests and benchmarks of every crate (feature
/// `test-util`).
#[cfg(any(test, feature = "test-util"))]
impl AnalyticsEvent {
    /// An SDK `screen_view` numbered `n` (its id unique per `n`) of the fixture catalog's app
    /// `20000000-0000-4000-8000-000000000001`, served flow `30000000-…-0001` at version
    /// `40000000-…-0002` on placement `onboarding`: user `user-{n}`, session `session-1`,
    /// iOS, SDK 1.2.3, at 2026-05-01 10:00 UTC plus `n % 1000` minutes and microseconds, with
    /// `screen_index` (`n`) and `properties` in its payload. A test changes what it needs
    /// with the `with_` methods or the public fields.
    pub fn sample(n: u32) -> Self {
        let mut payload = serde_json::Map::new();
        payload.insert("screen_index".to_owned(), serde_json::json!(n));
        payload.insert(
            "properties".to_owned(),
            serde_json::json!({"b": 1, "a": [true, null]}),
        );
        let offset = i64::from(n % 1000);
        let at = time::macros::datetime!(2026-05-01 10:00 UTC)
            + time::Duration::minutes(offset)
            + time::Duration::microseconds(offset);
        AnalyticsEvent::new(
            EventId::from_uuid(uuid::Uuid::from_u128(
                0x8000_0000_0000_4000_8000_0000_0000_0000 | u128::from(n),
            )),
            EventSource::Sdk,
            EventType::ScreenView,
            AppId::from_uuid(uuid::Uuid::from_u128(
                0x2000_0000_0000_4000_8000_0000_0000_0001,
            )),
            format!("user-{n}"),
            "session-1",
            Platform::Ios,
            at,
        )
        .with_flow_id(Some(FlowId::from_uuid(uuid::Uuid::from_u128(
            0x3000_0000_0000_4000_8000_0000_0000_0001,
        ))))
        .with_flow_version_id(Some(FlowVersionId::from_uuid(uuid::Uuid::from_u128(
            0x4000_0000_0000_4000_8000_0000_0000_0002,
        ))))
        .with_placement_key(Some("onboarding".to_owned()))
        .with_sdk_version(Some("1.2.3".to_owned()))
        .with_payload(payload)
    }

    /// The server's `resolve_no_flow` for a holdout (D8) of the same app: placement
    /// `paywall`, user `user-h`, session `session-h`, web, at 10:01 and 1 µs.
    pub fn sample_no_flow() -> Self {
        let at = time::macros::datetime!(2026-05-01 10:01:00.000001 UTC);
        AnalyticsEvent::new(
            EventId::from_uuid(uuid::Uuid::from_u128(
                0x9000_0000_0000_7000_8000_0000_0000_0001,
            )),
            EventSource::Server,
            EventType::ResolveNoFlow,
            AppId::from_uuid(uuid::Uuid::from_u128(
                0x2000_0000_0000_4000_8000_0000_0000_0001,
            )),
            "user-h",
            "session-h",
            Platform::Web,
            at,
        )
        .with_placement_key(Some("paywall".to_owned()))
        .with_experiment_id(Some("50000000-0000-4000-8000-000000000001".to_owned()))
        .with_variant_id(Some("60000000-0000-4000-8000-000000000004".to_owned()))
        .with_variant_name(Some("control".to_owned()))
        .with_reason(Some(NoFlowReason::Holdout))
    }
}

impl AnalyticsEvent {
    /// An event with its required fields; every optional field absent and an empty payload.
    /// The one way to build an event outside this crate (the type is `#[non_exhaustive]`): set
    /// the optional fields with the `with_` methods, so a new optional field changes no caller.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        event_id: EventId,
        source: EventSource,
        event_type: EventType,
        app_id: AppId,
        user_id: impl Into<String>,
        session_id: impl Into<String>,
        device_platform: Platform,
        occurred_at: OffsetDateTime,
    ) -> Self {
        Self {
            event_id,
            source,
            event_type,
            app_id,
            flow_id: None,
            flow_version_id: None,
            placement_key: None,
            user_id: user_id.into(),
            session_id: session_id.into(),
            device_platform,
            occurred_at,
            sdk_version: None,
            experiment_id: None,
            variant_id: None,
            variant_name: None,
            reason: None,
            payload: serde_json::Map::new(),
        }
    }

    /// With `flow_id`.
    pub fn with_flow_id(mut self, flow_id: Option<FlowId>) -> Self {
        self.flow_id = flow_id;
        self
    }

    /// With `flow_version_id`.
    pub fn with_flow_version_id(mut self, flow_version_id: Option<FlowVersionId>) -> Self {
        self.flow_version_id = flow_version_id;
        self
    }

    /// With `placement_key`.
    pub fn with_placement_key(mut self, placement_key: Option<String>) -> Self {
        self.placement_key = placement_key;
        self
    }

    /// With `sdk_version`.
    pub fn with_sdk_version(mut self, sdk_version: Option<String>) -> Self {
        self.sdk_version = sdk_version;
        self
    }

    /// With `experiment_id`.
    pub fn with_experiment_id(mut self, experiment_id: Option<String>) -> Self {
        self.experiment_id = experiment_id;
        self
    }

    /// With `variant_id`.
    pub fn with_variant_id(mut self, variant_id: Option<String>) -> Self {
        self.variant_id = variant_id;
        self
    }

    /// With `variant_name`.
    pub fn with_variant_name(mut self, variant_name: Option<String>) -> Self {
        self.variant_name = variant_name;
        self
    }

    /// With `reason`.
    pub fn with_reason(mut self, reason: Option<NoFlowReason>) -> Self {
        self.reason = reason;
        self
    }

    /// With `payload`: the event's other fields, as a JSON object.
    pub fn with_payload(mut self, payload: serde_json::Map<String, serde_json::Value>) -> Self {
        self.payload = payload;
        self
    }
}
