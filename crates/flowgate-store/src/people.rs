//! [`PeopleStore`] on [`Store`] (D28): the console's people, their one-time sign-in links and
//! sessions, and the console's signing key.
//!
//! - `people`: one row per person, unique by email (stored normalised: trimmed, lower-case),
//!   with the role, whether disabled, and the password's PHC string once set.
//! - `sign_in_links`: the SHA-256 (hex) of each link's secret, whom it signs in and until when;
//!   a link is deleted as it is taken (`DELETE ... RETURNING`, so two takes cannot both win).
//! - `console_sessions`: the SHA-256 (hex) of each session cookie, its person (none for the
//!   admin token's break-glass session), actor, role, CSRF token, times and address, with the
//!   row's `format` (D26). A person's sessions go when the person is disabled or changes role,
//!   in the same transaction.
//! - `console_secret`: one row, the key the console signs its sign-in forms with, written by
//!   the first replica that asks (`INSERT ... ON CONFLICT DO NOTHING`) and read by all.

use diesel::prelude::*;
use flowgate_domain::ids::PersonId;
use flowgate_domain::people::{
    normalize_email, Person, PersonUpdate, Role, SessionRecord, SignInLink, SESSION_FORMAT,
};
use flowgate_domain::ports::{BoxFuture, PeopleStore, StoreError};
use time::OffsetDateTime;

use crate::db::{columns, Conn};
use crate::error::{corrupt, unstorable, TransactionError};
use crate::schema::{console_secret, console_sessions, people, sign_in_links};
use crate::store::Store;
use crate::types::{DbTimestamp, DbUuid};

/// `value` as a `BIGINT`; refused when it is beyond one.
pub(crate) fn to_bigint(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| unstorable(format!("{what} {value} is too large")))
}

/// A stored `BIGINT` that must not be negative.
pub(crate) fn from_bigint(value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| corrupt(format!("{what} {value} is negative")))
}

/// `text` as a text column holds it: PostgreSQL's `text` cannot hold NUL, so a value with one
/// is refused on both backends alike.
pub(crate) fn text<'t>(value: &'t str, what: &str) -> Result<&'t str, StoreError> {
    if value.contains('\0') {
        return Err(unstorable(format!("the {what} contains a NUL character")));
    }
    Ok(value)
}

/// An optional [`text`].
pub(crate) fn optional_text<'t>(
    value: Option<&'t String>,
    what: &str,
) -> Result<Option<&'t str>, StoreError> {
    value.map(|v| text(v, what)).transpose()
}

fn role_of(stored: &str) -> Result<Role, StoreError> {
    stored
        .parse()
        .map_err(|e| corrupt(format!("a stored role: {e}")))
}

/// A person as read.
#[derive(Queryable, Selectable)]
#[diesel(table_name = people)]
struct PersonRow {
    id: DbUuid,
    email: String,
    role: String,
    disabled: bool,
    password_hash: Option<String>,
    created_at: DbTimestamp,
    updated_at: DbTimestamp,
}

impl PersonRow {
    fn into_person(self) -> Result<Person, StoreError> {
        Ok(Person {
            id: PersonId(self.id.0),
            email: self.email,
            role: role_of(&self.role)?,
            disabled: self.disabled,
            password_hash: self.password_hash,
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
        })
    }
}

/// A person to insert.
#[derive(Insertable)]
#[diesel(table_name = people, treat_none_as_default_value = false)]
struct NewPerson<'a> {
    id: DbUuid,
    email: &'a str,
    role: &'static str,
    disabled: bool,
    password_hash: Option<&'a str>,
    created_at: DbTimestamp,
    updated_at: DbTimestamp,
}

/// What [`PeopleStore::update_person`] sets; `None` fields are left as they are.
#[derive(AsChangeset)]
#[diesel(table_name = people)]
struct PersonChanges<'a> {
    role: Option<&'static str>,
    disabled: Option<bool>,
    password_hash: Option<&'a str>,
    updated_at: DbTimestamp,
}

/// A session as read.
#[derive(Queryable, Selectable)]
#[diesel(table_name = console_sessions)]
struct SessionRow {
    id_hash: String,
    person_id: Option<DbUuid>,
    actor: String,
    role: String,
    csrf: String,
    created_at: DbTimestamp,
    expires_at: DbTimestamp,
    address: Option<String>,
}

impl SessionRow {
    fn into_session(self) -> Result<SessionRecord, StoreError> {
        Ok(SessionRecord {
            id_hash: self.id_hash,
            person_id: self.person_id.map(|id| PersonId(id.0)),
            actor: self.actor,
            role: role_of(&self.role)?,
            csrf: self.csrf,
            created_at: self.created_at.0,
            expires_at: self.expires_at.0,
            address: self.address,
        })
    }
}

/// The role and whether disabled of each person `rows` name, read now: a session is read as
/// its person is now (issue 65), not as it was when the session opened.
async fn people_of(
    store: &Store,
    rows: &[SessionRow],
) -> Result<std::collections::HashMap<DbUuid, (String, bool)>, StoreError> {
    let ids: Vec<DbUuid> = rows.iter().filter_map(|r| r.person_id).collect();
    if ids.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    let found: Vec<(DbUuid, String, bool)> = store
        .db()
        .rows(people::table.filter(people::id.eq_any(ids)).select((
            people::id,
            people::role,
            people::disabled,
        )))
        .await?;
    Ok(found
        .into_iter()
        .map(|(id, role, disabled)| (id, (role, disabled)))
        .collect())
}

/// The sessions of `rows` as the port reads them: none whose person is gone or disabled, each
/// with its person's role now.
async fn as_read(store: &Store, rows: Vec<SessionRow>) -> Result<Vec<SessionRecord>, StoreError> {
    let people = people_of(store, &rows).await?;
    rows.into_iter()
        .filter_map(|mut row| {
            if let Some(id) = row.person_id {
                match people.get(&id) {
                    Some((role, false)) => row.role.clone_from(role),
                    _ => return None,
                }
            }
            Some(row.into_session())
        })
        .collect()
}

/// Sessions as the port lists them: newest first, then by id hash (sorted here, so that the
/// order is the bytes' on both backends whatever the database's collation).
async fn newest_first(
    store: &Store,
    rows: Vec<SessionRow>,
) -> Result<Vec<SessionRecord>, StoreError> {
    let mut sessions = as_read(store, rows).await?;
    sessions.sort_by(|a, b| (b.created_at, &b.id_hash).cmp(&(a.created_at, &a.id_hash)));
    Ok(sessions)
}

/// A session to insert.
#[derive(Insertable)]
#[diesel(table_name = console_sessions, treat_none_as_default_value = false)]
struct NewSession<'a> {
    id_hash: &'a str,
    format: i32,
    person_id: Option<DbUuid>,
    actor: &'a str,
    role: &'static str,
    csrf: &'a str,
    created_at: DbTimestamp,
    expires_at: DbTimestamp,
    address: Option<&'a str>,
}

/// The only session formats this release reads (see `flowgate_domain::people`'s Versions).
fn known_format() -> i32 {
    SESSION_FORMAT as i32
}

/// `update` applied to person `id` at `at`, in the caller's transaction: the row is written
/// first (on SQLite that takes the write lock before anything is read), then the role it had
/// decides whether its sessions go.
async fn update_in(
    conn: &mut Conn<'_>,
    id: DbUuid,
    update: &PersonUpdate,
    at: DbTimestamp,
) -> Result<Option<Person>, TransactionError> {
    let touched = conn
        .run(diesel::update(people::table.find(id)).set(people::updated_at.eq(at)))
        .await?;
    if touched == 0 {
        return Ok(None);
    }
    let before: String = conn
        .row(people::table.find(id).select(people::role))
        .await?;
    let changes = PersonChanges {
        role: update.role.map(Role::as_str),
        disabled: update.disabled,
        password_hash: optional_text(update.password_hash.as_ref(), "password hash")?,
        updated_at: at,
    };
    conn.run(diesel::update(people::table.find(id)).set(&changes))
        .await?;
    let role_changed = update.role.is_some_and(|role| role.as_str() != before);
    if update.disabled == Some(true) || role_changed {
        conn.run(diesel::delete(
            console_sessions::table.filter(console_sessions::person_id.eq(id)),
        ))
        .await?;
    }
    let row: PersonRow = conn
        .row(people::table.find(id).select(columns::<PersonRow>()))
        .await?;
    Ok(Some(row.into_person()?))
}

impl PeopleStore for Store {
    fn add_person(&self, person: Person) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let email = normalize_email(&person.email).map_err(unstorable)?;
            let row = NewPerson {
                id: DbUuid(person.id.0),
                email: &email,
                role: person.role.as_str(),
                disabled: person.disabled,
                password_hash: optional_text(person.password_hash.as_ref(), "password hash")?,
                created_at: DbTimestamp(person.created_at),
                updated_at: DbTimestamp(person.updated_at),
            };
            self.db()
                .run(diesel::insert_into(people::table).values(&row))
                .await?;
            Ok(())
        })
    }

    fn person(&self, id: PersonId) -> BoxFuture<'_, Result<Option<Person>, StoreError>> {
        Box::pin(async move {
            let rows: Vec<PersonRow> = self
                .db()
                .rows(
                    people::table
                        .find(DbUuid(id.0))
                        .select(columns::<PersonRow>()),
                )
                .await?;
            rows.into_iter()
                .next()
                .map(PersonRow::into_person)
                .transpose()
        })
    }

    fn person_by_email<'a>(
        &'a self,
        email: &'a str,
    ) -> BoxFuture<'a, Result<Option<Person>, StoreError>> {
        Box::pin(async move {
            let Ok(email) = normalize_email(email) else {
                return Ok(None);
            };
            let rows: Vec<PersonRow> = self
                .db()
                .rows(
                    people::table
                        .filter(people::email.eq(email))
                        .select(columns::<PersonRow>()),
                )
                .await?;
            rows.into_iter()
                .next()
                .map(PersonRow::into_person)
                .transpose()
        })
    }

    fn list_people(&self) -> BoxFuture<'_, Result<Vec<Person>, StoreError>> {
        Box::pin(async move {
            let rows: Vec<PersonRow> = self
                .db()
                .rows(people::table.select(columns::<PersonRow>()))
                .await?;
            let mut people = rows
                .into_iter()
                .map(PersonRow::into_person)
                .collect::<Result<Vec<_>, _>>()?;
            // By the bytes of the email, whatever the database's collation.
            people.sort_by(|a, b| a.email.cmp(&b.email));
            Ok(people)
        })
    }

    fn update_person(
        &self,
        id: PersonId,
        update: PersonUpdate,
        at: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Option<Person>, StoreError>> {
        Box::pin(async move {
            let update = &update;
            self.db()
                .transaction(async |conn| {
                    update_in(conn, DbUuid(id.0), update, DbTimestamp(at)).await
                })
                .await
        })
    }

    fn create_sign_in_link(&self, link: SignInLink) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            self.db()
                .run(diesel::insert_into(sign_in_links::table).values((
                    sign_in_links::token_hash.eq(text(&link.token_hash, "link hash")?),
                    sign_in_links::person_id.eq(DbUuid(link.person_id.0)),
                    sign_in_links::created_at.eq(DbTimestamp(link.created_at)),
                    sign_in_links::expires_at.eq(DbTimestamp(link.expires_at)),
                )))
                .await?;
            Ok(())
        })
    }

    fn sign_in_link<'a>(
        &'a self,
        token_hash: &'a str,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<PersonId>, StoreError>> {
        Box::pin(async move {
            let found: Vec<DbUuid> = self
                .db()
                .rows(
                    sign_in_links::table
                        .find(text(token_hash, "link hash")?)
                        .filter(sign_in_links::expires_at.gt(DbTimestamp(now)))
                        .select(sign_in_links::person_id),
                )
                .await?;
            Ok(found.into_iter().next().map(|id| PersonId(id.0)))
        })
    }

    fn take_sign_in_link<'a>(
        &'a self,
        token_hash: &'a str,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<PersonId>, StoreError>> {
        Box::pin(async move {
            // One statement deletes and reads: of two concurrent takes, the second deletes
            // nothing and gets nothing.
            let taken: Vec<(DbUuid, DbTimestamp)> = self
                .db()
                .rows(
                    diesel::delete(sign_in_links::table.find(token_hash))
                        .returning((sign_in_links::person_id, sign_in_links::expires_at)),
                )
                .await?;
            Ok(taken
                .into_iter()
                .next()
                .filter(|(_, expires_at)| expires_at.0 > now)
                .map(|(person, _)| PersonId(person.0)))
        })
    }

    fn create_session(&self, session: SessionRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let row = NewSession {
                id_hash: text(&session.id_hash, "session id hash")?,
                format: known_format(),
                person_id: session.person_id.map(|id| DbUuid(id.0)),
                actor: text(&session.actor, "session actor")?,
                role: session.role.as_str(),
                csrf: text(&session.csrf, "CSRF token")?,
                created_at: DbTimestamp(session.created_at),
                expires_at: DbTimestamp(session.expires_at),
                address: optional_text(session.address.as_ref(), "session address")?,
            };
            let person = row.person_id;
            let row = &row;
            // Written first (on SQLite that takes the write lock before anything is read), then
            // the person checked in the same transaction: a sign-in that raced a disable
            // stores nothing (issue 65).
            self.db()
                .transaction(async |conn| {
                    conn.run(diesel::insert_into(console_sessions::table).values(row))
                        .await?;
                    if let Some(id) = person {
                        let disabled: bool = conn
                            .row(people::table.find(id).select(people::disabled))
                            .await?;
                        if disabled {
                            return Err(StoreError::Conflict {
                                detail: format!("person {} is disabled", id.0),
                            }
                            .into());
                        }
                    }
                    Ok::<_, TransactionError>(())
                })
                .await
        })
    }

    fn session<'a>(
        &'a self,
        id_hash: &'a str,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<SessionRecord>, StoreError>> {
        Box::pin(async move {
            let rows: Vec<SessionRow> = self
                .db()
                .rows(
                    console_sessions::table
                        .find(id_hash)
                        .filter(console_sessions::expires_at.gt(DbTimestamp(now)))
                        .filter(console_sessions::format.le(known_format()))
                        .select(columns::<SessionRow>()),
                )
                .await?;
            Ok(as_read(self, rows).await?.into_iter().next())
        })
    }

    fn sessions_of(
        &self,
        person: PersonId,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Vec<SessionRecord>, StoreError>> {
        Box::pin(async move {
            let rows: Vec<SessionRow> = self
                .db()
                .rows(
                    console_sessions::table
                        .filter(console_sessions::person_id.eq(DbUuid(person.0)))
                        .filter(console_sessions::expires_at.gt(DbTimestamp(now)))
                        .filter(console_sessions::format.le(known_format()))
                        .select(columns::<SessionRow>()),
                )
                .await?;
            newest_first(self, rows).await
        })
    }

    fn all_sessions(
        &self,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Vec<SessionRecord>, StoreError>> {
        Box::pin(async move {
            let rows: Vec<SessionRow> = self
                .db()
                .rows(
                    console_sessions::table
                        .filter(console_sessions::expires_at.gt(DbTimestamp(now)))
                        .filter(console_sessions::format.le(known_format()))
                        .select(columns::<SessionRow>()),
                )
                .await?;
            newest_first(self, rows).await
        })
    }

    fn delete_session<'a>(&'a self, id_hash: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let deleted = self
                .db()
                .run(diesel::delete(console_sessions::table.find(id_hash)))
                .await?;
            Ok(deleted > 0)
        })
    }

    fn delete_sessions_of(&self, person: PersonId) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let deleted = self
                .db()
                .run(diesel::delete(
                    console_sessions::table
                        .filter(console_sessions::person_id.eq(DbUuid(person.0))),
                ))
                .await?;
            Ok(deleted as u64)
        })
    }

    fn delete_expired_sessions(
        &self,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let now = DbTimestamp(now);
            let deleted = self
                .db()
                .run(diesel::delete(
                    console_sessions::table.filter(console_sessions::expires_at.le(now)),
                ))
                .await?;
            self.db()
                .run(diesel::delete(
                    sign_in_links::table.filter(sign_in_links::expires_at.le(now)),
                ))
                .await?;
            Ok(deleted as u64)
        })
    }

    fn console_secret(&self, candidate: [u8; 32]) -> BoxFuture<'_, Result<[u8; 32], StoreError>> {
        Box::pin(async move {
            // The insert of a second caller waits for the first one's to commit, then does
            // nothing; the read after it sees the first one's row either way.
            self.db()
                .run(
                    diesel::insert_into(console_secret::table)
                        .values((
                            console_secret::id.eq(1),
                            console_secret::secret.eq(candidate.to_vec()),
                            console_secret::created_at.eq(DbTimestamp(OffsetDateTime::now_utc())),
                        ))
                        .on_conflict_do_nothing(),
                )
                .await?;
            let stored: Vec<u8> = self
                .db()
                .row(console_secret::table.find(1).select(console_secret::secret))
                .await?;
            stored
                .as_slice()
                .try_into()
                .map_err(|_| corrupt(format!("the console secret has {} bytes", stored.len())))
        })
    }
}
