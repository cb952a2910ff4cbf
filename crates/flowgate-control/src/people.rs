//! The console's people (D28) as operators manage them: a person added with a one-time
//! sign-in link, a new link, a role changed, an account disabled or enabled, each recorded in
//! the audit log as done by its actor (`cli` from the command line).

use flowgate_domain::ids::PersonId;
use flowgate_domain::people::{
    normalize_email, sha256_hex, AuditAction, NewAuditEntry, Person, PersonUpdate, Role, SignInLink,
};
use flowgate_domain::ports::StoreError;
use serde_json::{json, Value};
use time::OffsetDateTime;

use crate::ControlStore;

/// How long a sign-in link works (D28).
pub const LINK_LIFETIME: time::Duration = time::Duration::hours(24);

/// Why a person was not added or changed. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum PeopleFailure {
    /// The email or role is not acceptable (quoting it).
    #[error("{0}")]
    Invalid(String),
    /// No person has this email.
    #[error("no person {0:?}")]
    NotFound(String),
    /// A person with this email exists already.
    #[error("{0} is already a person here")]
    Exists(String),
    /// The person was removed between the read and the write.
    #[error("{0} was removed meanwhile")]
    Removed(String),
    /// The operating system gave no randomness for a link.
    #[error("no randomness for a sign-in link: {0}")]
    NoRandomness(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A person with a new one-time sign-in link: the secret (for the URL, shown once) and when
/// it expires. `audit` is the audit log's failure, if its entry was not written (the change
/// itself was).
#[derive(Debug)]
pub struct Linked {
    /// The person.
    pub person: Person,
    /// The link's secret: [`sign_in_link_path`] makes its path.
    pub secret: String,
    /// When the link stops working.
    pub expires_at: OffsetDateTime,
    /// The audit entry's failure, if any.
    pub audit: Option<StoreError>,
}

/// A new one-time sign-in link for `person`, made at `now`: the secret for the URL, and what
/// the store keeps (its SHA-256, never the secret).
pub fn new_sign_in_link(
    person: PersonId,
    now: OffsetDateTime,
) -> Result<(String, SignInLink), getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let link = SignInLink {
        token_hash: sha256_hex(secret.as_bytes()),
        person_id: person,
        created_at: now,
        expires_at: now + LINK_LIFETIME,
    };
    Ok((secret, link))
}

/// The path of a sign-in link's page (the console's address goes before it).
pub fn sign_in_link_path(secret: &str) -> String {
    format!("/console/set-password?token={secret}")
}

/// The person of `email`.
pub async fn person_of(store: &dyn ControlStore, email: &str) -> Result<Person, PeopleFailure> {
    let email = normalize_email(email).map_err(|e| PeopleFailure::Invalid(e.to_string()))?;
    match store.person_by_email(&email).await? {
        Some(person) => Ok(person),
        None => Err(PeopleFailure::NotFound(email)),
    }
}

/// Adds the person `email` with `role`, audited as `actor`'s, and makes their first link.
pub async fn add(
    store: &dyn ControlStore,
    (email, role): (&str, Role),
    actor: &str,
    now: OffsetDateTime,
) -> Result<Linked, PeopleFailure> {
    let id = PersonId::from_uuid(uuid::Uuid::new_v4());
    let person =
        Person::new(id, email, role, now).map_err(|e| PeopleFailure::Invalid(e.to_string()))?;
    match store.add_person(person.clone()).await {
        Ok(()) => {}
        Err(StoreError::Conflict { .. }) => return Err(PeopleFailure::Exists(person.email)),
        Err(e) => return Err(e.into()),
    }
    let detail = json!({"role": role.as_str()});
    let audited = audit(store, actor, AuditAction::PersonAdd, &person, detail, now).await;
    let mut linked = make_link(store, person, now).await?;
    linked.audit = audited.err();
    Ok(linked)
}

/// A new sign-in link for the person `email`, audited as `actor`'s.
pub async fn link(
    store: &dyn ControlStore,
    email: &str,
    actor: &str,
    now: OffsetDateTime,
) -> Result<Linked, PeopleFailure> {
    let person = person_of(store, email).await?;
    let detail = json!({"link": "made"});
    let audited = audit(
        store,
        actor,
        AuditAction::PersonPassword,
        &person,
        detail,
        now,
    )
    .await;
    let mut linked = make_link(store, person, now).await?;
    linked.audit = audited.err();
    Ok(linked)
}

/// Changes the person `email` (a role, disabled or not), audited as `actor`'s with what
/// changed; the person after, and the audit entry's failure if any.
pub async fn update(
    store: &dyn ControlStore,
    email: &str,
    change: PersonUpdate,
    actor: &str,
    now: OffsetDateTime,
) -> Result<(Person, Option<StoreError>), PeopleFailure> {
    let before = person_of(store, email).await?;
    let (action, detail) = match (&change.role, change.disabled) {
        (Some(role), _) => (
            AuditAction::PersonRole,
            json!({"from": before.role.as_str(), "to": role.as_str()}),
        ),
        (None, disabled) => (AuditAction::PersonDisable, json!({ "disabled": disabled })),
    };
    let Some(after) = store.update_person(before.id, change, now).await? else {
        return Err(PeopleFailure::Removed(before.email));
    };
    let audited = audit(store, actor, action, &after, detail, now).await;
    Ok((after, audited.err()))
}

/// Makes and stores a link for `person`.
async fn make_link(
    store: &dyn ControlStore,
    person: Person,
    now: OffsetDateTime,
) -> Result<Linked, PeopleFailure> {
    let (secret, link) =
        new_sign_in_link(person.id, now).map_err(|e| PeopleFailure::NoRandomness(e.to_string()))?;
    let expires_at = link.expires_at;
    store.create_sign_in_link(link).await?;
    Ok(Linked {
        person,
        secret,
        expires_at,
        audit: None,
    })
}

/// Appends `actor`'s `action` on `person` to the audit log.
async fn audit(
    store: &dyn ControlStore,
    actor: &str,
    action: AuditAction,
    person: &Person,
    detail: Value,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let entry = NewAuditEntry {
        at: now,
        actor: actor.to_owned(),
        action,
        target: Some(person.email.clone()),
        comment: None,
        revision_before: None,
        revision_after: None,
        detail,
    };
    store.append_audit(entry).await.map(|_| ())
}
