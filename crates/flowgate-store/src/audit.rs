//! [`AuditLog`] on [`Store`] (D28): the audit log in `audit_log`, one row per entry.
//!
//! A row holds the entry's fields in columns, `detail` as JSON text and the entry's `format`
//! (D26, `flowgate_domain::people`'s Versions). Ids come from the database (`BIGSERIAL`,
//! SQLite `AUTOINCREMENT`): they increase in the order entries were inserted and are never
//! used twice. Lists go by id, newest first, and a page continues below the last id seen.
//! Nothing deletes rows but retention ([`AuditLog::delete_audit_before`], by `at`).
//!
//! [`insert_audit_in`] appends inside a caller's transaction, so a catalog write and its entry
//! are committed together or not at all.

use diesel::prelude::*;
use diesel::sql_types::Bool;
use flowgate_domain::people::{AuditAction, AuditEntry, AuditQuery, NewAuditEntry, AUDIT_FORMAT};
use flowgate_domain::ports::{AuditLog, BoxFuture, StoreError};
use time::OffsetDateTime;

use crate::db::{columns, Conn};
use crate::error::{corrupt, query_error, unstorable};
use crate::people::{from_bigint, optional_text, text, to_bigint};
use crate::schema::audit_log;
use crate::store::Store;
use crate::types::DbTimestamp;

/// An entry to insert.
#[derive(Insertable)]
#[diesel(table_name = audit_log, treat_none_as_default_value = false)]
struct NewRow<'a> {
    format: i32,
    at: DbTimestamp,
    actor: &'a str,
    action: &'static str,
    target: Option<&'a str>,
    comment: Option<&'a str>,
    revision_before: Option<i64>,
    revision_after: Option<i64>,
    detail: String,
}

impl<'a> NewRow<'a> {
    fn new(entry: &'a NewAuditEntry) -> Result<Self, StoreError> {
        let revision = |r: Option<u64>| {
            r.map(|r| to_bigint(r, "the audit entry's revision"))
                .transpose()
        };
        Ok(Self {
            format: AUDIT_FORMAT as i32,
            at: DbTimestamp(entry.at),
            actor: text(&entry.actor, "audit actor")?,
            action: entry.action.as_str(),
            target: optional_text(entry.target.as_ref(), "audit target")?,
            comment: optional_text(entry.comment.as_ref(), "audit comment")?,
            revision_before: revision(entry.revision_before)?,
            revision_after: revision(entry.revision_after)?,
            // serde_json escapes NUL, so the text never holds one.
            detail: serde_json::to_string(&entry.detail).map_err(unstorable)?,
        })
    }
}

/// An entry as read.
#[derive(Queryable, Selectable)]
#[diesel(table_name = audit_log)]
struct Row {
    id: i64,
    format: i32,
    at: DbTimestamp,
    actor: String,
    action: String,
    target: Option<String>,
    comment: Option<String>,
    revision_before: Option<i64>,
    revision_after: Option<i64>,
    detail: String,
}

impl Row {
    /// The entry; `None` for an action this release does not know (a later release's entry:
    /// it stays stored, D26, and a list leaves it out).
    fn into_entry(self) -> Result<Option<AuditEntry>, StoreError> {
        let Ok(action) = self.action.parse::<AuditAction>() else {
            return Ok(None);
        };
        let revision = |r: Option<i64>| {
            r.map(|r| from_bigint(r, "an audit entry's revision"))
                .transpose()
        };
        Ok(Some(AuditEntry {
            id: self.id,
            format: u32::try_from(self.format).map_err(|_| {
                corrupt(format!(
                    "audit entry {} has format {}",
                    self.id, self.format
                ))
            })?,
            at: self.at.0,
            actor: self.actor,
            action,
            target: self.target,
            comment: self.comment,
            revision_before: revision(self.revision_before)?,
            revision_after: revision(self.revision_after)?,
            detail: serde_json::from_str(&self.detail).map_err(|e| {
                corrupt(format!("audit entry {}'s detail is not JSON: {e}", self.id))
            })?,
        }))
    }
}

/// Appends `entry` on `conn`, inside the caller's transaction when it has one (the catalog
/// apply records its entry in the transaction that writes the catalog); returns its id.
pub(crate) async fn insert_audit_in(
    conn: &mut Conn<'_>,
    entry: &NewAuditEntry,
) -> Result<i64, StoreError> {
    let row = NewRow::new(entry)?;
    conn.row(
        diesel::insert_into(audit_log::table)
            .values(&row)
            .returning(audit_log::id),
    )
    .await
    .map_err(query_error)
}

/// `at` as the store keeps it: to the microsecond.
fn stored_time(at: OffsetDateTime) -> OffsetDateTime {
    at.replace_nanosecond(at.nanosecond() / 1_000 * 1_000)
        .unwrap_or(at)
}

impl AuditLog for Store {
    fn append_audit(&self, entry: NewAuditEntry) -> BoxFuture<'_, Result<AuditEntry, StoreError>> {
        Box::pin(async move {
            let mut pooled = self.db().checkout().await?;
            let id = insert_audit_in(&mut pooled.conn(), &entry).await?;
            let mut stored = AuditEntry::new(id, entry);
            stored.at = stored_time(stored.at);
            Ok(stored)
        })
    }

    fn list_audit<'a>(
        &'a self,
        query: &'a AuditQuery,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, StoreError>> {
        Box::pin(async move {
            // One statement whatever the filters: an absent filter is an always-true bound
            // (the widest time, the largest id) or `OR true`, so no query is built per backend.
            let since = query
                .since
                .unwrap_or(time::macros::datetime!(0001-01-01 0:00 UTC));
            let until = query
                .until
                .unwrap_or(time::macros::datetime!(9999-12-31 23:59:59.999999 UTC));
            let actor = query.actor.as_deref().unwrap_or("");
            let action = query.action.map_or("", AuditAction::as_str);
            let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
            let rows: Vec<Row> = self
                .db()
                .rows(
                    audit_log::table
                        .filter(audit_log::at.ge(DbTimestamp(since)))
                        .filter(audit_log::at.lt(DbTimestamp(until)))
                        .filter(audit_log::id.lt(query.before_id.unwrap_or(i64::MAX)))
                        .filter(
                            audit_log::actor
                                .eq(actor)
                                .or(query.actor.is_none().into_sql::<Bool>()),
                        )
                        .filter(
                            audit_log::action
                                .eq(action)
                                .or(query.action.is_none().into_sql::<Bool>()),
                        )
                        .order(audit_log::id.desc())
                        .limit(limit)
                        .select(columns::<Row>()),
                )
                .await?;
            let mut entries = Vec::with_capacity(rows.len());
            for row in rows {
                entries.extend(row.into_entry()?);
            }
            Ok(entries)
        })
    }

    fn count_audit<'a>(
        &'a self,
        action: AuditAction,
        target: &'a str,
        since: OffsetDateTime,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let count: i64 = self
                .db()
                .row(
                    audit_log::table
                        .filter(audit_log::action.eq(action.as_str()))
                        .filter(audit_log::target.eq(target))
                        .filter(audit_log::at.ge(DbTimestamp(since)))
                        .count(),
                )
                .await?;
            from_bigint(count, "an audit count")
        })
    }

    fn delete_audit_before(
        &self,
        cutoff: OffsetDateTime,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let deleted = self
                .db()
                .run(diesel::delete(
                    audit_log::table.filter(audit_log::at.lt(DbTimestamp(cutoff))),
                ))
                .await?;
            Ok(deleted as u64)
        })
    }
}
