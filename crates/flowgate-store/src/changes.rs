//! [`ChangeStore`] on [`Store`] (D28): proposed catalog changes in `catalog_changes`, one row
//! per change.
//!
//! A row holds who proposed the change and when, the catalog revision it was made on, the
//! change's own versioned JSON as text (the catalog's change module reads it; the store never
//! looks inside), its one-line summary and comment, where it stands (`pending`, `applied`,
//! `withdrawn`, `failed`) and the decision, with the row's `format` (D26). A decision is one
//! `UPDATE ... WHERE state = 'pending'`: of two concurrent decisions exactly one moves the
//! change. [`decide_change_in`] decides inside a caller's transaction, so a catalog write and
//! the change it applies are committed together or not at all.

use diesel::prelude::*;
use flowgate_domain::ids::ChangeId;
use flowgate_domain::people::{ChangeDecision, ChangeRecord, ChangeState, CHANGE_RECORD_FORMAT};
use flowgate_domain::ports::{BoxFuture, ChangeStore, StoreError};

use crate::db::{columns, Conn};
use crate::error::{corrupt, query_error, unstorable};
use crate::people::{from_bigint, optional_text, text, to_bigint};
use crate::schema::catalog_changes as changes;
use crate::store::Store;
use crate::types::{DbTimestamp, DbUuid};

/// A change to insert.
#[derive(Insertable)]
#[diesel(table_name = changes, treat_none_as_default_value = false)]
struct NewRow<'a> {
    id: DbUuid,
    format: i32,
    author: &'a str,
    created_at: DbTimestamp,
    base_revision: i64,
    change: String,
    summary: &'a str,
    comment: &'a str,
    state: &'static str,
    decided_by: Option<&'a str>,
    decided_at: Option<DbTimestamp>,
    applied_revision: Option<i64>,
    note: Option<&'a str>,
    apply_at: Option<DbTimestamp>,
}

/// A change as read.
#[derive(Queryable, Selectable)]
#[diesel(table_name = changes)]
struct Row {
    id: DbUuid,
    author: String,
    created_at: DbTimestamp,
    base_revision: i64,
    change: String,
    summary: String,
    comment: String,
    state: String,
    decided_by: Option<String>,
    decided_at: Option<DbTimestamp>,
    applied_revision: Option<i64>,
    note: Option<String>,
    apply_at: Option<DbTimestamp>,
}

impl Row {
    fn into_record(self) -> Result<ChangeRecord, StoreError> {
        let id = ChangeId(self.id.0);
        Ok(ChangeRecord {
            id,
            author: self.author,
            created_at: self.created_at.0,
            base_revision: from_bigint(self.base_revision, "a change's base revision")?,
            change: serde_json::from_str(&self.change)
                .map_err(|e| corrupt(format!("change {id} is not JSON: {e}")))?,
            summary: self.summary,
            comment: self.comment,
            state: self
                .state
                .parse()
                .map_err(|e| corrupt(format!("change {id}: {e}")))?,
            decided_by: self.decided_by,
            decided_at: self.decided_at.map(|t| t.0),
            applied_revision: self
                .applied_revision
                .map(|r| from_bigint(r, "a change's applied revision"))
                .transpose()?,
            note: self.note,
            apply_at: self.apply_at.map(|t| t.0),
        })
    }
}

/// What a decision sets.
#[derive(AsChangeset)]
#[diesel(table_name = changes, treat_none_as_null = true)]
struct Decision<'a> {
    state: &'static str,
    decided_by: Option<&'a str>,
    decided_at: Option<DbTimestamp>,
    applied_revision: Option<i64>,
    note: Option<&'a str>,
}

/// Records `decision` on change `id` if it is pending, on `conn` (inside the caller's
/// transaction when it has one): `true` when it moved, `false` when it is unknown or decided
/// already (nothing written). A decision to `Pending` is [`StoreError::Unstorable`].
pub(crate) async fn decide_change_in(
    conn: &mut Conn<'_>,
    id: ChangeId,
    decision: &ChangeDecision,
) -> Result<bool, StoreError> {
    if decision.state == ChangeState::Pending {
        return Err(unstorable(format!(
            "change {id} cannot be decided to be pending"
        )));
    }
    let set = Decision {
        state: decision.state.as_str(),
        decided_by: Some(text(&decision.by, "decider")?),
        decided_at: Some(DbTimestamp(decision.at)),
        applied_revision: decision
            .applied_revision
            .map(|r| to_bigint(r, "the applied revision"))
            .transpose()?,
        note: optional_text(decision.note.as_ref(), "change note")?,
    };
    let moved = conn
        .run(
            diesel::update(
                changes::table
                    .find(DbUuid(id.0))
                    .filter(changes::state.eq(ChangeState::Pending.as_str())),
            )
            .set(&set),
        )
        .await
        .map_err(query_error)?;
    Ok(moved == 1)
}

impl ChangeStore for Store {
    fn insert_change(&self, change: ChangeRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let row = NewRow {
                id: DbUuid(change.id.0),
                format: CHANGE_RECORD_FORMAT as i32,
                author: text(&change.author, "change author")?,
                created_at: DbTimestamp(change.created_at),
                base_revision: to_bigint(change.base_revision, "the base revision")?,
                // serde_json escapes NUL, so the text never holds one.
                change: serde_json::to_string(&change.change).map_err(unstorable)?,
                summary: text(&change.summary, "change summary")?,
                comment: text(&change.comment, "change comment")?,
                state: change.state.as_str(),
                decided_by: optional_text(change.decided_by.as_ref(), "decider")?,
                decided_at: change.decided_at.map(DbTimestamp),
                applied_revision: change
                    .applied_revision
                    .map(|r| to_bigint(r, "the applied revision"))
                    .transpose()?,
                note: optional_text(change.note.as_ref(), "change note")?,
                apply_at: change.apply_at.map(DbTimestamp),
            };
            self.db()
                .run(diesel::insert_into(changes::table).values(&row))
                .await?;
            Ok(())
        })
    }

    fn change(&self, id: ChangeId) -> BoxFuture<'_, Result<Option<ChangeRecord>, StoreError>> {
        Box::pin(async move {
            let rows: Vec<Row> = self
                .db()
                .rows(changes::table.find(DbUuid(id.0)).select(columns::<Row>()))
                .await?;
            rows.into_iter().next().map(Row::into_record).transpose()
        })
    }

    fn list_changes(
        &self,
        state: Option<ChangeState>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<ChangeRecord>, StoreError>> {
        Box::pin(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let newest_first = (changes::created_at.desc(), changes::id.desc());
            let rows: Vec<Row> = match state {
                Some(state) => {
                    self.db()
                        .rows(
                            changes::table
                                .filter(changes::state.eq(state.as_str()))
                                .order(newest_first)
                                .limit(limit)
                                .select(columns::<Row>()),
                        )
                        .await?
                }
                None => {
                    self.db()
                        .rows(
                            changes::table
                                .order(newest_first)
                                .limit(limit)
                                .select(columns::<Row>()),
                        )
                        .await?
                }
            };
            rows.into_iter().map(Row::into_record).collect()
        })
    }

    fn due_changes(
        &self,
        now: time::OffsetDateTime,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<ChangeRecord>, StoreError>> {
        Box::pin(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows: Vec<Row> = self
                .db()
                .rows(
                    changes::table
                        .filter(changes::state.eq(ChangeState::Pending.as_str()))
                        .filter(changes::apply_at.le(DbTimestamp(now)))
                        .order((changes::apply_at.asc(), changes::id.asc()))
                        .limit(limit)
                        .select(columns::<Row>()),
                )
                .await?;
            rows.into_iter().map(Row::into_record).collect()
        })
    }

    fn decide_change(
        &self,
        id: ChangeId,
        decision: ChangeDecision,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut pooled = self.db().checkout().await?;
            decide_change_in(&mut pooled.conn(), id, &decision).await
        })
    }
}
