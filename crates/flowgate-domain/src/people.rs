//! People of the console, their sessions, the audit log and proposed catalog changes (D28): the
//! records the storage ports [`PeopleStore`](crate::ports::PeopleStore),
//! [`AuditLog`](crate::ports::AuditLog) and [`ChangeStore`](crate::ports::ChangeStore) keep.
//!
//! Nothing here authenticates anybody: the console hashes passwords (argon2id), makes session
//! ids and sign-in links, and stores only what these types hold. Secrets never reach a store:
//! a session is kept by the SHA-256 of its cookie value and a sign-in link by the SHA-256 of
//! the secret it carries ([`sha256_hex`]).
//!
//! # Versions
//!
//! The one place that says which versions of the stored records of this module exist (D26).
//! Each is stored with its fields in columns and a `format` column; a later version may add
//! optional columns only, so readers read any version's columns as they are.
//!
//! - an audit entry ([`AUDIT_FORMAT`]): `detail` is JSON text;
//! - a console session ([`SESSION_FORMAT`]): a session of a version newer than this release
//!   knows is taken as absent (its person signs in again) and left where it is;
//! - a proposed change ([`CHANGE_RECORD_FORMAT`]): the row's version; its `change` document is
//!   versioned by the catalog's change module, which writes and reads it, and the stores keep
//!   it as opaque JSON text.
//!
//! | record | version | written by | what changed |
//! |---|---|---|---|
//! | audit entry | 1 | 0.3.0 and later | the first |
//! | console session | 1 | 0.3.0 and later | the first |
//! | proposed change | 1 | 0.3.0 and later | the first |

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::ids::{ChangeId, PersonId};

/// The stored version of an audit entry this release writes (see the module's Versions).
pub const AUDIT_FORMAT: u32 = 1;

/// The stored version of a console session this release writes (see the module's Versions).
pub const SESSION_FORMAT: u32 = 1;

/// The stored version of a proposed change's record this release writes (see the module's
/// Versions).
pub const CHANGE_RECORD_FORMAT: u32 = 1;

/// The longest email address accepted (RFC 5321's limit on a forward path, less the angle
/// brackets).
pub const MAX_EMAIL_LEN: usize = 254;

/// The actor of the admin token's break-glass sessions and of what they do (D28).
pub const ADMIN_TOKEN_ACTOR: &str = "admin-token";

/// A value of this module that does not parse or is not acceptable; each quotes the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeopleError {
    /// Not an email address flowgate accepts.
    #[error("`{value}` is not an email address: {reason}")]
    InvalidEmail {
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Not a role's name.
    #[error("unknown role `{0}` (expected viewer, editor or admin)")]
    UnknownRole(String),
    /// Not an audit action's name.
    #[error("unknown audit action `{0}`")]
    UnknownAction(String),
    /// Not a change state's name.
    #[error("unknown change state `{0}` (expected pending, applied, withdrawn or failed)")]
    UnknownChangeState(String),
}

/// What a person may do in the console (D28). Ordered by power: `Viewer < Editor < Admin`, and
/// each role may do everything the lesser ones may.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Every page, explain, preview.
    Viewer,
    /// Also proposes and applies catalog changes, manages SDK keys.
    Editor,
    /// Also manages people.
    Admin,
}

impl Role {
    /// Every role, least powerful first.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Editor, Role::Admin];

    /// `viewer`, `editor` or `admin`, as stored and configured.
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }

    /// Whether this role may do what needs `needed`.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = PeopleError;

    /// The role named exactly as [`Role::as_str`] writes it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| PeopleError::UnknownRole(s.to_owned()))
    }
}

/// The form an email address is stored and compared in: trimmed and lower-case, one `@` with
/// something on each side, at most [`MAX_EMAIL_LEN`] characters, no whitespace or control
/// characters inside. The error quotes the value as given.
pub fn normalize_email(value: &str) -> Result<String, PeopleError> {
    let invalid = |reason| PeopleError::InvalidEmail {
        value: value.to_owned(),
        reason,
    };
    let email = value.trim().to_lowercase();
    if email.is_empty() {
        return Err(invalid("it is empty"));
    }
    if email.chars().count() > MAX_EMAIL_LEN {
        return Err(invalid("it is longer than 254 characters"));
    }
    if email.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid("it contains whitespace or a control character"));
    }
    let Some((local, domain)) = email.split_once('@') else {
        return Err(invalid("it has no `@`"));
    };
    if domain.contains('@') {
        return Err(invalid("it has more than one `@`"));
    }
    if local.is_empty() || domain.is_empty() {
        return Err(invalid("a part before or after the `@` is empty"));
    }
    Ok(email)
}

/// Lower-case hex of the SHA-256 of `secret`: how a session id or a sign-in link's secret is
/// kept in a store (never the secret itself).
pub fn sha256_hex(secret: &[u8]) -> String {
    Sha256::digest(secret)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A person who may sign in to the console (D28).
#[derive(Clone, PartialEq, Eq)]
pub struct Person {
    /// Its id.
    pub id: PersonId,
    /// The email address, as [`normalize_email`] gives it; unique among people. Stores
    /// normalise it when a person is added.
    pub email: String,
    /// What the person may do.
    pub role: Role,
    /// A disabled person cannot sign in and has no sessions.
    pub disabled: bool,
    /// The password's PHC string (argon2id, written by the console); `None` until set, and for
    /// people who sign in with OpenID Connect only.
    pub password_hash: Option<String>,
    /// When the person was added.
    pub created_at: OffsetDateTime,
    /// When the person was last changed.
    pub updated_at: OffsetDateTime,
}

impl Person {
    /// A person added at `at`, enabled, without a password; the email is normalised
    /// ([`normalize_email`]).
    pub fn new(
        id: PersonId,
        email: &str,
        role: Role,
        at: OffsetDateTime,
    ) -> Result<Self, PeopleError> {
        Ok(Self {
            id,
            email: normalize_email(email)?,
            role,
            disabled: false,
            password_hash: None,
            created_at: at,
            updated_at: at,
        })
    }
}

impl fmt::Debug for Person {
    /// Leaves the password hash out: it is not a secret, but nothing gains from logging it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Person")
            .field("id", &self.id)
            .field("email", &self.email)
            .field("role", &self.role)
            .field("disabled", &self.disabled)
            .field(
                "password_hash",
                &self.password_hash.as_ref().map(|_| "<redacted>"),
            )
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .finish()
    }
}

/// A change to a [`Person`]: each `Some` field is set, each `None` left as it is.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PersonUpdate {
    /// A new role.
    pub role: Option<Role>,
    /// Disabled (`true`) or enabled again (`false`).
    pub disabled: Option<bool>,
    /// A new password's PHC string.
    pub password_hash: Option<String>,
}

impl fmt::Debug for PersonUpdate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PersonUpdate")
            .field("role", &self.role)
            .field("disabled", &self.disabled)
            .field(
                "password_hash",
                &self.password_hash.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// A one-time sign-in link (D28: `flowgate users add` prints one, valid 24 h, where the person
/// sets a password). It works once, and only before it expires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignInLink {
    /// [`sha256_hex`] of the secret in the link.
    pub token_hash: String,
    /// Whom it signs in.
    pub person_id: PersonId,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it stops working.
    pub expires_at: OffsetDateTime,
}

/// A console session as stored (D28): any replica serves it, and a restart signs nobody out.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// [`sha256_hex`] of the cookie value; never the value itself.
    pub id_hash: String,
    /// The person signed in; `None` for the admin token's break-glass session.
    pub person_id: Option<PersonId>,
    /// The person's email, or [`ADMIN_TOKEN_ACTOR`]: who the audit log names.
    pub actor: String,
    /// The role the session acts with (the person's when it began).
    pub role: Role,
    /// The session's CSRF token, which the console's forms carry.
    pub csrf: String,
    /// When it began.
    pub created_at: OffsetDateTime,
    /// When it ends.
    pub expires_at: OffsetDateTime,
    /// The address it was started from, if known.
    pub address: Option<String>,
}

impl fmt::Debug for SessionRecord {
    /// Leaves the CSRF token out: it is a secret of the session.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionRecord")
            .field("id_hash", &self.id_hash)
            .field("person_id", &self.person_id)
            .field("actor", &self.actor)
            .field("role", &self.role)
            .field("csrf", &"<redacted>")
            .field("created_at", &self.created_at)
            .field("expires_at", &self.expires_at)
            .field("address", &self.address)
            .finish()
    }
}

macro_rules! named_enum {
    (
        $(#[$doc:meta])*
        $name:ident, $error:ident {
            $($(#[$vdoc:meta])* $variant:ident = $text:literal,)*
        }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The stable name, as stored and shown.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = PeopleError;

            /// The value named exactly as `as_str` writes it.
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)*
                    _ => Err(PeopleError::$error(s.to_owned())),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
                name.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

named_enum!(
    /// What an audit entry records (D28). The names are stable: they are stored, filtered on
    /// and shown.
    AuditAction, UnknownAction {
        /// A catalog file imported (`flowgate import`, the admin API).
        CatalogImport = "catalog.import",
        /// A catalog change applied (console, schedule).
        CatalogChange = "catalog.change",
        /// A change proposed for review.
        ChangePropose = "change.propose",
        /// A proposed change approved.
        ChangeApprove = "change.approve",
        /// A proposed change withdrawn by its author.
        ChangeWithdraw = "change.withdraw",
        /// A proposed change rejected by a reviewer, with why (D35).
        ChangeReject = "change.reject",
        /// A sign-in.
        SignIn = "sign_in",
        /// A refused sign-in (the target is the account tried).
        SignInFailed = "sign_in.failed",
        /// A sign-in or a password change refused before any password was checked: too
        /// many attempts (429), or a disabled person's link (issue 65). Not counted as a
        /// failure of the account.
        SignInRefused = "sign_in.refused",
        /// A sign-out.
        SignOut = "sign_out",
        /// A session revoked by someone else.
        SessionRevoke = "session.revoke",
        /// An API key created.
        KeyCreate = "key.create",
        /// An API key revoked.
        KeyRevoke = "key.revoke",
        /// A person added.
        PersonAdd = "person.add",
        /// A person's role changed.
        PersonRole = "person.role",
        /// A person disabled or enabled.
        PersonDisable = "person.disable",
        /// A person's password set.
        PersonPassword = "person.password",
        /// A step of a staged rollout applied (D29).
        RolloutStep = "rollout.step",
        /// A staged rollout rolled back (D29).
        RolloutRollback = "rollout.rollback",
        /// A staged rollout paused (by a person, or a sample ratio mismatch).
        RolloutPause = "rollout.pause",
        /// A paused staged rollout resumed.
        RolloutResume = "rollout.resume",
        /// A staged rollout ended as abandoned: its experiment left the catalog or ended
        /// without it (issue 65).
        RolloutAbandon = "rollout.abandon",
    }
);

named_enum!(
    /// Where a proposed catalog change stands (D28).
    ChangeState, UnknownChangeState {
        /// Proposed, waiting for review or to be applied.
        Pending = "pending",
        /// Applied to the catalog.
        Applied = "applied",
        /// Withdrawn by its author.
        Withdrawn = "withdrawn",
        /// Applying it failed (e.g. the catalog changed since it was made); nothing was written.
        Failed = "failed",
        /// Rejected by a reviewer (D35), their comment in the change's note; nothing was
        /// written to the catalog.
        Rejected = "rejected",
    }
);

/// An audit entry's id: assigned by the log, increasing in the order entries were appended.
pub type AuditId = i64;

/// An entry to append to the audit log (D28).
#[derive(Clone, Debug, PartialEq)]
pub struct NewAuditEntry {
    /// When it happened.
    pub at: OffsetDateTime,
    /// Who: a person's email, [`ADMIN_TOKEN_ACTOR`], `cli` or `scheduler`.
    pub actor: String,
    /// What.
    pub action: AuditAction,
    /// What it was done to (a person's email, a key id, a change id), if anything.
    pub target: Option<String>,
    /// The comment given with it, if any.
    pub comment: Option<String>,
    /// The catalog revision before a catalog write.
    pub revision_before: Option<u64>,
    /// The catalog revision after a catalog write.
    pub revision_after: Option<u64>,
    /// Anything else, e.g. a dry-run summary: free JSON, stored as text.
    pub detail: serde_json::Value,
}

/// An entry of the audit log, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditEntry {
    /// Its id (see [`AuditId`]).
    pub id: AuditId,
    /// The version it was written in (see the module's Versions).
    pub format: u32,
    /// When it happened.
    pub at: OffsetDateTime,
    /// Who.
    pub actor: String,
    /// What.
    pub action: AuditAction,
    /// What it was done to, if anything.
    pub target: Option<String>,
    /// The comment given with it, if any.
    pub comment: Option<String>,
    /// The catalog revision before a catalog write.
    pub revision_before: Option<u64>,
    /// The catalog revision after a catalog write.
    pub revision_after: Option<u64>,
    /// Anything else.
    pub detail: serde_json::Value,
}

impl AuditEntry {
    /// `entry` as stored under `id`, in this release's format ([`AUDIT_FORMAT`]).
    pub fn new(id: AuditId, entry: NewAuditEntry) -> Self {
        Self {
            id,
            format: AUDIT_FORMAT,
            at: entry.at,
            actor: entry.actor,
            action: entry.action,
            target: entry.target,
            comment: entry.comment,
            revision_before: entry.revision_before,
            revision_after: entry.revision_after,
            detail: entry.detail,
        }
    }
}

/// Which audit entries to list: those matching every filter given, newest first (by id,
/// descending), at most `limit`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only entries at or after this time.
    pub since: Option<OffsetDateTime>,
    /// Only entries before this time.
    pub until: Option<OffsetDateTime>,
    /// Only entries of this actor.
    pub actor: Option<String>,
    /// Only entries of this action.
    pub action: Option<AuditAction>,
    /// Only entries with a smaller id: the next page after one whose last entry had this id.
    pub before_id: Option<AuditId>,
    /// The most entries to return.
    pub limit: usize,
}

impl AuditQuery {
    /// The `limit` newest entries, unfiltered.
    pub fn latest(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// Whether `entry` passes every filter (not the limit): the in-memory reference of what a
    /// store selects.
    pub fn matches(&self, entry: &AuditEntry) -> bool {
        self.since.is_none_or(|since| entry.at >= since)
            && self.until.is_none_or(|until| entry.at < until)
            && self
                .actor
                .as_ref()
                .is_none_or(|actor| &entry.actor == actor)
            && self.action.is_none_or(|action| entry.action == action)
            && self.before_id.is_none_or(|before| entry.id < before)
    }
}

/// A proposed catalog change as stored (D28).
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeRecord {
    /// Its id.
    pub id: ChangeId,
    /// Who proposed it (a person's email).
    pub author: String,
    /// When it was proposed.
    pub created_at: OffsetDateTime,
    /// The catalog revision it was made on: applying it fails if the catalog changed since.
    pub base_revision: u64,
    /// The change itself: its own versioned JSON, which the stores keep as it is.
    pub change: serde_json::Value,
    /// One line saying what it does, e.g. `ship trial of paywall-price-test`.
    pub summary: String,
    /// The author's comment.
    pub comment: String,
    /// Where it stands.
    pub state: ChangeState,
    /// Who decided it (approved, withdrew, or whose attempt failed).
    pub decided_by: Option<String>,
    /// When it was decided.
    pub decided_at: Option<OffsetDateTime>,
    /// The catalog revision applying it left.
    pub applied_revision: Option<u64>,
    /// Why it failed, if it did.
    pub note: Option<String>,
    /// When the scheduler applies it (D29), if it is scheduled: to the catalog as it is then,
    /// as `scheduler`; `None`: a person applies it.
    pub apply_at: Option<OffsetDateTime>,
}

/// The decision on a pending change: what [`ChangeStore::decide_change`] writes.
///
/// [`ChangeStore::decide_change`]: crate::ports::ChangeStore::decide_change
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeDecision {
    /// The new state: `Applied`, `Withdrawn`, `Failed` or `Rejected`.
    pub state: ChangeState,
    /// Who decided.
    pub by: String,
    /// When.
    pub at: OffsetDateTime,
    /// The catalog revision applying it left (for `Applied`).
    pub applied_revision: Option<u64>,
    /// Why it failed (for `Failed`).
    pub note: Option<String>,
}

impl ChangeRecord {
    /// This record with `decision` applied (no check of its current state).
    pub fn decided(mut self, decision: ChangeDecision) -> Self {
        self.state = decision.state;
        self.decided_by = Some(decision.by);
        self.decided_at = Some(decision.at);
        self.applied_revision = decision.applied_revision;
        self.note = decision.note;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_and_round_trip() {
        assert!(Role::Viewer < Role::Editor && Role::Editor < Role::Admin);
        assert!(Role::Admin.allows(Role::Editor));
        assert!(Role::Editor.allows(Role::Editor));
        assert!(!Role::Viewer.allows(Role::Editor));
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
            let json = serde_json::to_string(&role).unwrap();
            assert_eq!(json, format!("\"{}\"", role.as_str()));
        }
        let error = "Owner".parse::<Role>().unwrap_err();
        assert!(error.to_string().contains("`Owner`"), "{error}");
    }

    #[test]
    fn emails_are_normalised_or_refused_with_the_value() {
        assert_eq!(
            normalize_email("  Ann.Lee@Example.COM\n").as_deref(),
            Ok("ann.lee@example.com")
        );
        for bad in [
            "",
            "   ",
            "ann",
            "@example.com",
            "ann@",
            "ann@b@c",
            "ann lee@example.com",
            "ann\u{7}@example.com",
        ] {
            let error = normalize_email(bad).unwrap_err();
            assert!(error.to_string().contains(&format!("`{bad}`")), "{error}");
        }
        let long = format!("{}@example.com", "a".repeat(MAX_EMAIL_LEN));
        assert!(normalize_email(&long).is_err());
        let longest = format!("{}@example.com", "a".repeat(MAX_EMAIL_LEN - 12));
        assert_eq!(
            normalize_email(&longest).map(|e| e.len()),
            Ok(MAX_EMAIL_LEN)
        );
    }

    #[test]
    fn actions_and_states_have_stable_names() {
        let names: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            names,
            [
                "catalog.import",
                "catalog.change",
                "change.propose",
                "change.approve",
                "change.withdraw",
                "change.reject",
                "sign_in",
                "sign_in.failed",
                "sign_in.refused",
                "sign_out",
                "session.revoke",
                "key.create",
                "key.revoke",
                "person.add",
                "person.role",
                "person.disable",
                "person.password",
                "rollout.step",
                "rollout.rollback",
                "rollout.pause",
                "rollout.resume",
                "rollout.abandon",
            ]
        );
        for action in AuditAction::ALL {
            assert_eq!(action.as_str().parse::<AuditAction>(), Ok(*action));
            let json = serde_json::to_value(action).unwrap();
            assert_eq!(
                serde_json::from_value::<AuditAction>(json).unwrap(),
                *action
            );
        }
        for state in ChangeState::ALL {
            assert_eq!(state.as_str().parse::<ChangeState>(), Ok(*state));
        }
        assert!("sign-in".parse::<AuditAction>().is_err());
        assert!("Pending".parse::<ChangeState>().is_err());
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let mut person = Person::new(
            PersonId::from_uuid(uuid::Uuid::nil()),
            "a@b",
            Role::Viewer,
            OffsetDateTime::UNIX_EPOCH,
        )
        .unwrap();
        person.password_hash = Some("$argon2id$secret".to_owned());
        assert!(!format!("{person:?}").contains("secret"));
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
