//! [`DeadLetterStore`] on [`Store`] (D17): events the store refused for good, and bus messages
//! that could not be decoded or stored, kept in `analytics_dead_letters` until replayed.
//!
//! Dead letters are rare (each is an event the store refused), so they are written one
//! statement per letter in one transaction, which also keeps the upsert (a letter per
//! `app_id` and `event_id`, D25) the same on both backends.

use diesel::prelude::*;
use flowgate_domain::ids::{AppId, DeadLetterId, EventId};
use flowgate_domain::ports::{BoxFuture, DeadLetter, DeadLetterStore, StoreError};
use time::OffsetDateTime;

use crate::db::columns;
use crate::error::corrupt;
use crate::schema::analytics_dead_letters as letters;
use crate::store::Store;
use crate::types::{DbTimestamp, DbUuid};

/// A dead letter as stored.
#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = letters, treat_none_as_default_value = false)]
struct Row {
    id: DbUuid,
    event_id: Option<DbUuid>,
    app_id: Option<DbUuid>,
    format: String,
    payload: Vec<u8>,
    error: String,
    first_attempt_at: DbTimestamp,
    last_attempt_at: DbTimestamp,
    attempts: i32,
}

/// PostgreSQL's `text` cannot hold NUL; an error message quoting a refused value might.
fn storable(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

impl Row {
    fn new(letter: &DeadLetter) -> Self {
        Self {
            id: DbUuid(letter.id.0),
            event_id: letter.event_id.map(|id| DbUuid(id.0)),
            app_id: letter.app_id.map(|id| DbUuid(id.0)),
            format: storable(&letter.format),
            payload: letter.payload.clone(),
            error: storable(&letter.error),
            first_attempt_at: DbTimestamp(letter.first_attempt_at),
            last_attempt_at: DbTimestamp(letter.last_attempt_at),
            attempts: i32::try_from(letter.attempts).unwrap_or(i32::MAX),
        }
    }

    fn into_letter(self) -> Result<DeadLetter, StoreError> {
        Ok(DeadLetter {
            id: DeadLetterId(self.id.0),
            event_id: self.event_id.map(|id| EventId(id.0)),
            app_id: self.app_id.map(|id| AppId(id.0)),
            format: self.format,
            payload: self.payload,
            error: self.error,
            first_attempt_at: self.first_attempt_at.0,
            last_attempt_at: self.last_attempt_at.0,
            attempts: u32::try_from(self.attempts).map_err(|_| {
                corrupt(format!(
                    "dead letter {} has {} attempts",
                    self.id.0, self.attempts
                ))
            })?,
        })
    }
}

impl DeadLetterStore for Store {
    fn add_dead_letters<'a>(
        &'a self,
        letters: &'a [DeadLetter],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if letters.is_empty() {
                return Ok(());
            }
            let rows: Vec<Row> = letters.iter().map(Row::new).collect();
            let rows = &rows;
            self.db()
                .transaction(async |conn| {
                    for row in rows {
                        // Only the partial unique index on (app_id, event_id) can conflict
                        // (ids are fresh). diesel writes no conflict target with a WHERE for
                        // SQLite, so the update of an existing letter is a statement of its
                        // own.
                        let inserted = conn
                            .run(
                                diesel::insert_into(letters::table)
                                    .values(row)
                                    .on_conflict_do_nothing(),
                            )
                            .await?;
                        // A letter without an app (an undecodable message, or one older than
                        // the per-app key) never conflicts: NULLs are distinct in the index.
                        if let (0, Some(event_id), Some(app_id)) =
                            (inserted, row.event_id, row.app_id)
                        {
                            let same = letters::table
                                .filter(letters::event_id.eq(event_id))
                                .filter(letters::app_id.eq(app_id));
                            conn.run(diesel::update(same).set((
                                letters::attempts.eq(letters::attempts + row.attempts),
                                letters::last_attempt_at.eq(row.last_attempt_at),
                                letters::error.eq(&row.error),
                            )))
                            .await?;
                        }
                    }
                    Ok(())
                })
                .await
        })
    }

    fn list_dead_letters(
        &self,
        after: Option<DeadLetterId>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        Box::pin(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let page = letters::table
                .select(columns::<Row>())
                .order(letters::id)
                .limit(limit);
            let rows: Vec<Row> = match after {
                Some(after) => {
                    self.db()
                        .rows(page.filter(letters::id.gt(DbUuid(after.0))))
                        .await?
                }
                None => self.db().rows(page).await?,
            };
            rows.into_iter().map(Row::into_letter).collect()
        })
    }

    fn record_dead_letter_attempt<'a>(
        &'a self,
        id: DeadLetterId,
        error: &'a str,
        at: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let error = storable(error);
            let updated = self
                .db()
                .run(diesel::update(letters::table.find(DbUuid(id.0))).set((
                    letters::attempts.eq(letters::attempts + 1),
                    letters::last_attempt_at.eq(DbTimestamp(at)),
                    letters::error.eq(&error),
                )))
                .await?;
            if updated == 0 {
                return Err(StoreError::NotFound {
                    entity: "dead letter",
                    which: id.to_string(),
                });
            }
            Ok(())
        })
    }

    fn remove_dead_letter(&self, id: DeadLetterId) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let removed = self
                .db()
                .run(diesel::delete(letters::table.find(DbUuid(id.0))))
                .await?;
            Ok(removed > 0)
        })
    }

    fn count_dead_letters(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let count: i64 = self.db().row(letters::table.count()).await?;
            Ok(u64::try_from(count).unwrap_or(0))
        })
    }
}
