//! Typed identifiers. Every catalog entity is identified by a UUID (D2); a newtype per entity
//! keeps a flow id from being passed where a version id is expected.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// Wraps a UUID.
            pub const fn from_uuid(id: Uuid) -> Self {
                Self(id)
            }

            /// The UUID inside.
            pub const fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;

            /// Parses the hyphenated form only (D7: "UUIDs (any version, hyphenated)").
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                parse_hyphenated(s).map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }
    };
}

/// Parses a UUID written in its hyphenated 36-character form (`8-4-4-4-12`), the only form the
/// API accepts (D7). `uuid::Uuid::parse_str` also takes simple, braced and URN forms.
pub fn parse_hyphenated(s: &str) -> Result<Uuid, uuid::Error> {
    uuid::fmt::Hyphenated::from_str(s).map(uuid::fmt::Hyphenated::into_uuid)
}

uuid_id!(
    /// A workspace: owns apps and API keys (D2).
    WorkspaceId
);
uuid_id!(
    /// An app of a workspace (D2).
    AppId
);
uuid_id!(
    /// A flow of an app (D2).
    FlowId
);
uuid_id!(
    /// One version of a flow (D2).
    FlowVersionId
);
uuid_id!(
    /// An experiment attached to a placement rule (D2).
    ExperimentId
);
uuid_id!(
    /// A variant of an experiment (D2).
    VariantId
);
uuid_id!(
    /// An API key record (D1); never the key itself.
    KeyId
);
uuid_id!(
    /// An analytics event (D7, D8).
    EventId
);
uuid_id!(
    /// A dead letter: an event, or a bus message, the store refused for good (D17).
    DeadLetterId
);
uuid_id!(
    /// A person who may sign in to the console (D28).
    PersonId
);
uuid_id!(
    /// A proposed catalog change (D28).
    ChangeId
);
uuid_id!(
    /// A staged rollout (D29).
    RolloutId
);

/// A time-ordered UUIDv7 stamped with `at`; its random bits come from the operating system's
/// generator.
fn uuid_v7(at: time::OffsetDateTime) -> Uuid {
    let nanos = at.unix_timestamp_nanos().max(0);
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(0);
    let subsec = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Uuid::new_v7(uuid::Timestamp::from_unix(uuid::NoContext, secs, subsec))
}

impl EventId {
    /// A new time-ordered UUIDv7 stamped with `at`, for server events (D8).
    pub fn new_v7(at: time::OffsetDateTime) -> Self {
        Self(uuid_v7(at))
    }
}

impl DeadLetterId {
    /// A new time-ordered UUIDv7 stamped with `at`: dead letters list in the order they came.
    pub fn new_v7(at: time::OffsetDateTime) -> Self {
        Self(uuid_v7(at))
    }
}

impl PersonId {
    /// A new time-ordered UUIDv7 stamped with `at`.
    pub fn new_v7(at: time::OffsetDateTime) -> Self {
        Self(uuid_v7(at))
    }
}

impl ChangeId {
    /// A new time-ordered UUIDv7 stamped with `at`: changes list in the order they came.
    pub fn new_v7(at: time::OffsetDateTime) -> Self {
        Self(uuid_v7(at))
    }
}

impl RolloutId {
    /// A new time-ordered UUIDv7 stamped with `at`: rollouts list in the order they began.
    pub fn new_v7(at: time::OffsetDateTime) -> Self {
        Self(uuid_v7(at))
    }
}
