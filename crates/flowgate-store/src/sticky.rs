//! [`StickyStore`] on [`Store`] (D23): the stored sticky assignments, GrowthBook's assignment
//! documents, in `sticky_assignments` (migration `2026-11-29-000000_sticky_assignment`).
//!
//! **What is stored.** One row per assignment: (`app_id`, `attribute_name`, `attribute_value`,
//! `assignment_key`) is the key, `variant_key` the variant, `updated_at` the database's time of
//! the last write. A document is the rows of one app, attribute name and value; it exists
//! exactly while it has an assignment. The app id scopes documents per tenant; there is no
//! foreign key to `apps` (assignments outlive catalog edits), and no trigger bumps the catalog
//! revision (the snapshot does not read the table). Names and values are opaque text, compared
//! byte for byte; an identifier or assignment containing NUL, which PostgreSQL's `text` cannot
//! hold, is never stored on either backend (its write is skipped and its read finds nothing), so
//! one odd identifier cannot fail a batch of other users' writes.
//!
//! **Versions.** This layout is version 1 of the assignment documents, the only one so far;
//! the versions and what a reader keeps are said once, in the Versions section of
//! [`flowgate_domain::sticky`], and a golden sample is in `formats/flowgate.sticky/v1/`
//! (`sql-rows.json`). No version is stored in the rows, so the rows every release wrote are
//! read as they are. A read keeps the rows that are assignments
//! ([`is_assignment`]: `assignment_key` `<key>__<non-negative integer>`, a non-empty
//! `variant_key`) and skips any other row of the document rather than failing the read, so a
//! later version can add rows of another form (metadata) that this release leaves alone; a
//! document of such rows only reads as no document. A new column is added nullable or with a
//! default (expand/contract, D26), which this release's reads and writes do not name.
//!
//! **Merge on write.** [`StickyStore::write_sticky`] upserts every assignment of its batch
//! (`ON CONFLICT (key) DO UPDATE SET variant_key = excluded.variant_key, updated_at = ...`): an
//! assignment key already stored takes the new variant, the document's other keys are kept, so
//! replicas writing the same user's documents never erase each other's assignments. Within a
//! batch the later write of a key wins: the batch is reduced to one row per key first (a
//! PostgreSQL upsert cannot change a row twice in one statement), and the rows are written in
//! key order, so concurrent batches lock common rows in the same order and cannot deadlock.
//! The statements of a batch, [`WRITE_CHUNK`] rows each, run in one transaction.
//!
//! **One round trip to read.** [`StickyStore::read_sticky`] reads every identifier of a request
//! with one statement on the primary key; [`StickyStore::read_sticky_many`] sends the reads of
//! several requests and apps in one statement too. On PostgreSQL the identifiers go as four
//! arrays (read index, app, attribute name and value) joined with the table, each row naming
//! the read it answers, so a read gets only its own app's documents. It runs on clients of its
//! own, up to [`READERS_PER_THREAD`] per thread taken in turn (made on first use, the statement
//! prepared once, `plan_cache_mode = force_custom_plan`: a generic plan cannot know how many
//! identifiers the arrays hold and scanned the table, which held a pinned replica at about
//! 3,000 reads a second against 16,000 with a plan per execution in bench/sticky.py), not on
//! the pool: a resolve's read never waits for a pooled connection or hops to the thread that
//! drives one, sticky load cannot starve event writes, and a deadline that drops a read
//! mid-query leaves the client usable (tokio-postgres reads and discards the answer). On SQLite
//! (in-process) it runs on the pool as a task of its own, so a caller that stops waiting never
//! cancels a statement in the middle; [`READ_CHUNK`] identifiers per statement, far more than a
//! request has; a combined read is its reads, each so, all at once.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use diesel::expression::{is_aggregate, AppearsOnTable, Expression, ValidGrouping};
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, Bool, Text};
use diesel::sqlite::Sqlite;
use flowgate_domain::ids::AppId;
use flowgate_domain::ports::{BoxFuture, Outage, StickyStore, StoreError};
use flowgate_domain::sticky::{is_assignment, StickyDocs, StickyId, StickyWrite};
use futures_util::future::{FutureExt, Shared};

use crate::db::{columns, Db, Postgres};
use crate::error::{database_error, query_error, unavailable};
use crate::schema::sticky_assignments;
use crate::store::Store;
use crate::types::{sql, DbUuid};

/// Rows per insert statement: 5 parameters each on SQLite, 5,000 in all (SQLite allows 32,766;
/// PostgreSQL's 65,535 is never near, its five parameters are arrays).
const WRITE_CHUNK: usize = 1_000;

/// Identifiers per read statement: 2 parameters each and the app's on SQLite, 20,001 in all
/// (under SQLite's 32,766); on PostgreSQL four array parameters whatever the count.
const READ_CHUNK: usize = 10_000;

const _: () = assert!(5 * WRITE_CHUNK <= 32_766 && 2 * READ_CHUNK < 32_766);

/// Whether `text` can be stored: PostgreSQL's `text` cannot hold NUL.
fn storable(text: &str) -> bool {
    !text.contains('\0')
}

/// A stored assignment, as read.
#[derive(Queryable, Selectable)]
#[diesel(table_name = sticky_assignments)]
struct AssignmentRow {
    attribute_name: String,
    attribute_value: String,
    assignment_key: String,
    variant_key: String,
}

/// An assignment to write: a row of `sticky_assignments` (its time is the database's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Assignment<'w> {
    app_id: DbUuid,
    attribute_name: &'w str,
    attribute_value: &'w str,
    assignment_key: &'w str,
    variant_key: &'w str,
}

/// The assignments of `writes`, one per key (the later write of a key wins), in key order,
/// without those that cannot be stored.
fn assignments(writes: &[StickyWrite]) -> Vec<Assignment<'_>> {
    let mut latest = BTreeMap::new();
    for write in writes {
        let doc = &write.doc;
        if !storable(&doc.attribute_name) || !storable(&doc.attribute_value) {
            continue;
        }
        for (key, variant) in &doc.assignments {
            if storable(key) && storable(variant) {
                latest.insert(
                    (
                        DbUuid(write.app_id.0),
                        doc.attribute_name.as_str(),
                        doc.attribute_value.as_str(),
                        key.as_str(),
                    ),
                    variant.as_str(),
                );
            }
        }
    }
    latest
        .into_iter()
        .map(
            |((app_id, attribute_name, attribute_value, assignment_key), variant_key)| Assignment {
                app_id,
                attribute_name,
                attribute_value,
                assignment_key,
                variant_key,
            },
        )
        .collect()
}

/// The identifiers a store can hold (PostgreSQL's `text` cannot hold NUL).
fn storable_ids(ids: &[StickyId]) -> Vec<&StickyId> {
    ids.iter()
        .filter(|id| storable(&id.attribute_name) && storable(&id.attribute_value))
        .collect()
}

/// Reads the documents of `ids` in `app` on `pooled`, to the end.
async fn read_on(
    mut pooled: crate::db::Pooled,
    app: AppId,
    ids: &[&StickyId],
) -> Result<StickyDocs, StoreError> {
    let mut docs = StickyDocs::new();
    let mut conn = pooled.conn();
    for chunk in ids.chunks(READ_CHUNK) {
        let rows: Vec<AssignmentRow> = conn
            .rows(
                sticky_assignments::table
                    .filter(sticky_assignments::app_id.eq(DbUuid(app.0)))
                    .filter(IdentifierIn::new(chunk))
                    .select(columns::<AssignmentRow>()),
            )
            .await
            .map_err(query_error)?;
        for row in rows
            .into_iter()
            .filter(|r| is_assignment(&r.assignment_key, &r.variant_key))
        {
            docs.assignments_mut(&row.attribute_name, &row.attribute_value)
                .insert(row.assignment_key, row.variant_key);
        }
    }
    Ok(docs)
}

impl StickyStore for Store {
    /// On PostgreSQL, this thread's reader (see the module documentation). On SQLite the query
    /// runs in a task of its own: a caller that stops waiting (resolve's
    /// `sticky.read_timeout_ms`) never cancels a statement in the middle, and a task whose
    /// caller has gone before it got a connection does not run its query.
    fn read_sticky<'a>(
        &'a self,
        app: AppId,
        ids: &'a [StickyId],
    ) -> BoxFuture<'a, Result<StickyDocs, StoreError>> {
        if let Db::Postgres(pg) = self.db() {
            return Box::pin(async move {
                let mut docs = pg.read_sticky_docs(&[(app, storable_ids(ids))]).await?;
                Ok(docs.pop().unwrap_or_default())
            });
        }
        let store = self.clone();
        let ids = ids.to_vec();
        Box::pin(async move {
            if storable_ids(&ids).is_empty() {
                return Ok(StickyDocs::new());
            }
            let (answer, waiting) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let mut answer = answer;
                let pooled = {
                    let checkout = std::pin::pin!(store.db().checkout());
                    let gone = std::pin::pin!(answer.closed());
                    match futures_util::future::select(gone, checkout).await {
                        futures_util::future::Either::Left(_) => return,
                        futures_util::future::Either::Right((pooled, _)) => pooled,
                    }
                };
                let result = match pooled {
                    Ok(pooled) => read_on(pooled, app, &storable_ids(&ids)).await,
                    Err(e) => Err(e),
                };
                let _ = answer.send(result);
            });
            waiting.await.unwrap_or_else(|_| {
                Err(StoreError::Other {
                    detail: "the sticky assignment read ended without an answer".to_owned(),
                })
            })
        })
    }

    /// On PostgreSQL every read in one statement on this thread's reader; on SQLite (in
    /// process, no round trip to save) each read as [`read_sticky`](Self::read_sticky) runs
    /// it, all at once.
    fn read_sticky_many<'a>(
        &'a self,
        reads: &'a [(AppId, &'a [StickyId])],
    ) -> BoxFuture<'a, Result<Vec<StickyDocs>, StoreError>> {
        if let Db::Postgres(pg) = self.db() {
            return Box::pin(async move {
                let reads: Vec<(AppId, Vec<&StickyId>)> = reads
                    .iter()
                    .map(|(app, ids)| (*app, storable_ids(ids)))
                    .collect();
                pg.read_sticky_docs(&reads).await
            });
        }
        Box::pin(futures_util::future::try_join_all(
            reads.iter().map(|(app, ids)| self.read_sticky(*app, ids)),
        ))
    }

    fn write_sticky<'a>(
        &'a self,
        writes: &'a [StickyWrite],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let rows = assignments(writes);
            if rows.is_empty() {
                return Ok(());
            }
            let rows = &rows;
            // On SQLite the first statement is a write, so the transaction takes the write
            // lock at once (waiting up to busy_timeout).
            self.db()
                .transaction(async |conn| {
                    for chunk in rows.chunks(WRITE_CHUNK) {
                        conn.run(Upsert::new(chunk)).await?;
                    }
                    Ok(())
                })
                .await
        })
    }
}

/// The predicate `(attribute_name, attribute_value) IN (...)` over a list of identifiers,
/// written per backend (diesel has no row-value `IN`).
struct IdentifierIn<'a> {
    names: Vec<&'a str>,
    values: Vec<&'a str>,
}

impl<'a> IdentifierIn<'a> {
    fn new(ids: &[&'a StickyId]) -> Self {
        Self {
            names: ids.iter().map(|id| id.attribute_name.as_str()).collect(),
            values: ids.iter().map(|id| id.attribute_value.as_str()).collect(),
        }
    }

    /// `(attribute_name, attribute_value) IN `.
    fn walk_pair<'b, DB>(&self, out: &mut AstPass<'_, 'b, DB>) -> QueryResult<()>
    where
        DB: diesel::backend::Backend,
        sticky_assignments::attribute_name: QueryFragment<DB>,
        sticky_assignments::attribute_value: QueryFragment<DB>,
    {
        out.push_sql("(");
        sticky_assignments::attribute_name.walk_ast(out.reborrow())?;
        out.push_sql(", ");
        sticky_assignments::attribute_value.walk_ast(out.reborrow())?;
        out.push_sql(") IN ");
        Ok(())
    }
}

impl Expression for IdentifierIn<'_> {
    type SqlType = Bool;
}

impl<QS> AppearsOnTable<QS> for IdentifierIn<'_>
where
    sticky_assignments::attribute_name: AppearsOnTable<QS>,
    sticky_assignments::attribute_value: AppearsOnTable<QS>,
{
}

impl<GB> ValidGrouping<GB> for IdentifierIn<'_> {
    type IsAggregate = is_aggregate::Never;
}

impl QueryFragment<Pg> for IdentifierIn<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.walk_pair(&mut out)?;
        out.push_sql("(SELECT * FROM UNNEST(");
        out.push_bind_param::<Array<Text>, _>(&self.names)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.values)?;
        out.push_sql("))");
        Ok(())
    }
}

impl QueryFragment<Sqlite> for IdentifierIn<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        // One text per count: not worth a prepared statement each.
        out.unsafe_to_cache_prepared();
        self.walk_pair(&mut out)?;
        // A subquery over the VALUES rather than the VALUES themselves: only so does SQLite's
        // planner search the primary key on all three columns instead of scanning the app.
        out.push_sql("(SELECT column1, column2 FROM (VALUES ");
        for (i, (name, value)) in self.names.iter().zip(&self.values).enumerate() {
            out.push_sql(if i == 0 { "(" } else { ", (" });
            out.push_bind_param::<Text, _>(name)?;
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(value)?;
            out.push_sql(")");
        }
        out.push_sql("))");
        Ok(())
    }
}

/// Cached by its SQL text (on PostgreSQL the same whatever the count), not by a static id.
impl QueryId for IdentifierIn<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

/// The upsert of a chunk of assignments, column by column: arrays zipped by `UNNEST` on
/// PostgreSQL (one statement text whatever the chunk's size), a multi-row `VALUES` on SQLite.
struct Upsert<'w> {
    app_ids: Vec<DbUuid>,
    names: Vec<&'w str>,
    values: Vec<&'w str>,
    keys: Vec<&'w str>,
    variants: Vec<&'w str>,
}

const UPSERT_COLUMNS: &str =
    "INSERT INTO sticky_assignments (app_id, attribute_name, attribute_value, assignment_key, \
     variant_key) ";

/// A stored key takes the new variant; the row's other keys are the document's and stay.
const UPSERT_CONFLICT: &str =
    " ON CONFLICT (app_id, attribute_name, attribute_value, assignment_key) \
     DO UPDATE SET variant_key = excluded.variant_key, updated_at = excluded.updated_at";

impl<'w> Upsert<'w> {
    fn new(rows: &[Assignment<'w>]) -> Self {
        Self {
            app_ids: rows.iter().map(|r| r.app_id).collect(),
            names: rows.iter().map(|r| r.attribute_name).collect(),
            values: rows.iter().map(|r| r.attribute_value).collect(),
            keys: rows.iter().map(|r| r.assignment_key).collect(),
            variants: rows.iter().map(|r| r.variant_key).collect(),
        }
    }
}

impl QueryFragment<Pg> for Upsert<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(UPSERT_COLUMNS);
        out.push_sql("SELECT * FROM UNNEST(");
        out.push_bind_param::<Array<sql::Uuid>, _>(&self.app_ids)?;
        for column in [&self.names, &self.values, &self.keys, &self.variants] {
            out.push_sql(", ");
            out.push_bind_param::<Array<Text>, _>(column)?;
        }
        out.push_sql(")");
        out.push_sql(UPSERT_CONFLICT);
        Ok(())
    }
}

impl QueryFragment<Sqlite> for Upsert<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        // One text per chunk size: not worth a prepared statement each.
        out.unsafe_to_cache_prepared();
        out.push_sql(UPSERT_COLUMNS);
        out.push_sql("VALUES ");
        for (i, app_id) in self.app_ids.iter().enumerate() {
            out.push_sql(if i == 0 { "(" } else { ", (" });
            out.push_bind_param::<sql::Uuid, _>(app_id)?;
            for column in [&self.names, &self.values, &self.keys, &self.variants] {
                out.push_sql(", ");
                out.push_bind_param::<Text, _>(&column[i])?;
            }
            out.push_sql(")");
        }
        out.push_sql(UPSERT_CONFLICT);
        Ok(())
    }
}

/// Cached by its SQL text (on PostgreSQL the same whatever the chunk's size).
impl QueryId for Upsert<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

#[cfg(test)]
mod tests {
    use diesel::query_builder::Query;
    use diesel::sql_types::Untyped;
    use diesel::{Connection, RunQueryDsl, SqliteConnection};
    use diesel_migrations::MigrationHarness;

    use flowgate_domain::sticky::StickyDoc;

    use super::*;

    /// `EXPLAIN QUERY PLAN` of a query, with its parameters.
    struct Plan<Q>(Q);

    impl<Q: QueryFragment<Sqlite>> QueryFragment<Sqlite> for Plan<Q> {
        fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
            out.push_sql("EXPLAIN QUERY PLAN ");
            self.0.walk_ast(out.reborrow())
        }
    }

    impl<Q> QueryId for Plan<Q> {
        type QueryId = ();
        const HAS_STATIC_QUERY_ID: bool = false;
    }

    impl<Q> Query for Plan<Q> {
        type SqlType = Untyped;
    }

    impl<Q, C> RunQueryDsl<C> for Plan<Q> {}

    #[derive(QueryableByName)]
    struct Step {
        #[diesel(sql_type = Text)]
        detail: String,
    }

    fn id(value: &str) -> StickyId {
        StickyId {
            attribute_name: "user_id".to_owned(),
            attribute_value: value.to_owned(),
        }
    }

    /// The read looks every identifier up on the primary key: it never scans the app's
    /// documents, however many it has.
    #[test]
    fn the_sqlite_read_searches_the_primary_key() {
        let mut conn = SqliteConnection::establish(":memory:").unwrap();
        conn.run_pending_migrations(crate::SQLITE_MIGRATIONS)
            .unwrap();
        let (a, b, c) = (id("a"), id("b"), id("c"));
        let ids = [&a, &b, &c];
        let read = sticky_assignments::table
            .filter(sticky_assignments::app_id.eq(DbUuid(uuid::Uuid::nil())))
            .filter(IdentifierIn::new(&ids))
            .select(columns::<AssignmentRow>());
        let steps: Vec<Step> = Plan(read).load(&mut conn).unwrap();
        let search = steps
            .iter()
            .find(|s| s.detail.contains("sticky_assignments"))
            .map(|s| s.detail.as_str());
        assert!(
            search.is_some_and(|s| s.starts_with("SEARCH")
                && s.contains("(app_id=? AND attribute_name=? AND attribute_value=?)")),
            "{:?}",
            steps.iter().map(|s| &s.detail).collect::<Vec<_>>()
        );
    }

    /// The PostgreSQL statements have one text whatever the count, so each connection
    /// prepares them once.
    #[test]
    fn the_postgres_statements_do_not_depend_on_the_count() {
        use diesel::pg::PgQueryBuilder;
        use diesel::query_builder::QueryBuilder;
        fn sql(query: &impl QueryFragment<Pg>) -> String {
            assert!(query.is_safe_to_cache_prepared(&Pg).unwrap());
            let mut builder = PgQueryBuilder::new();
            query.to_sql(&mut builder, &Pg).unwrap();
            builder.finish()
        }
        let (a, b) = (id("a"), id("b"));
        assert_eq!(
            sql(&IdentifierIn::new(&[&a])),
            sql(&IdentifierIn::new(&[&a, &b]))
        );
        assert_eq!(
            sql(&IdentifierIn::new(&[&a])),
            "(\"sticky_assignments\".\"attribute_name\", \
             \"sticky_assignments\".\"attribute_value\") IN (SELECT * FROM UNNEST($1, $2))"
        );
        let row = |value| Assignment {
            app_id: DbUuid(uuid::Uuid::nil()),
            attribute_name: "user_id",
            attribute_value: value,
            assignment_key: "e__0",
            variant_key: "v",
        };
        assert_eq!(
            sql(&Upsert::new(&[row("a")])),
            sql(&Upsert::new(&[row("a"), row("b")]))
        );
    }

    /// One row per key, the later write winning, in key order; what cannot be stored is left
    /// out.
    #[test]
    fn a_batch_becomes_one_row_per_key() {
        let doc = |value: &str, assignments: &[(&str, &str)]| StickyWrite {
            app_id: AppId::from_uuid(uuid::Uuid::nil()),
            doc: StickyDoc {
                attribute_name: "user_id".to_owned(),
                attribute_value: value.to_owned(),
                assignments: assignments
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            },
        };
        let writes = [
            doc("u2", &[("e__0", "a")]),
            doc("u1", &[("e__0", "a"), ("f__1", "x")]),
            doc("u1", &[("e__0", "b")]),
            doc("u\0", &[("e__0", "a")]),
            doc("u3", &[("e__0", "a\0")]),
        ];
        let rows: Vec<_> = assignments(&writes)
            .iter()
            .map(|r| (r.attribute_value, r.assignment_key, r.variant_key))
            .collect();
        assert_eq!(
            rows,
            [
                ("u1", "e__0", "b"),
                ("u1", "f__1", "x"),
                ("u2", "e__0", "a")
            ]
        );
    }
}

/// The statement of a sticky read on PostgreSQL: every identifier of one read or of a
/// combined read (`read_sticky_many`) in one round trip, as four arrays: the read's index,
/// its app, the attribute's name and value. Each row says which read it answers, so a read
/// gets only the documents of its own app.
const PG_READ: &str = "SELECT r.read, s.attribute_name, s.attribute_value, s.assignment_key, \
     s.variant_key FROM UNNEST($1::int4[], $2::text[], $3::text[], $4::text[]) \
     AS r(read, app_id, attribute_name, attribute_value) \
     JOIN sticky_assignments s ON s.app_id = r.app_id::uuid \
     AND s.attribute_name = r.attribute_name AND s.attribute_value = r.attribute_value";

/// A client of its own for sticky reads on PostgreSQL, with the read prepared on it.
struct PgReader {
    client: tokio_postgres::Client,
    statement: tokio_postgres::Statement,
}

/// What making a reader gives: the reader, or why there is none.
type Made = Result<Arc<PgReader>, StoreError>;

/// A reader being made: the reads that find none wait for it (`shared`) instead of each
/// opening their own connection; the others go on with the thread's readers, and the next
/// read takes the new one from `slot`, where the task leaves it (a shared future that no read
/// awaits is never polled, so its outcome cannot be read from it).
#[derive(Clone)]
struct Connecting {
    shared: Shared<BoxFuture<'static, Made>>,
    slot: Arc<std::sync::Mutex<Option<Made>>>,
}

thread_local! {
    /// Each thread's reader per database (by [`Postgres::id`]): its connection task runs on
    /// the runtime of the thread that made it, so a resolve's read never hops to another
    /// thread and back.
    static PG_READERS: RefCell<Vec<(u64, Arc<PgReader>)>> = const { RefCell::new(Vec::new()) };
    /// The reader each database is making on this thread, if any.
    static PG_CONNECTING: RefCell<Vec<(u64, Connecting)>> = const { RefCell::new(Vec::new()) };
    /// Whose turn is next among the thread's readers.
    static PG_TURN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Readers (connections) per thread and database.
const READERS_PER_THREAD: usize = 8;

fn pg_read_error(error: &tokio_postgres::Error) -> StoreError {
    match error.as_db_error() {
        Some(db) => database_error(db.code().code(), format!("sticky read: {}", db.message())),
        None => unavailable(Outage::Connection, format!("sticky read: {error}")),
    }
}

impl Postgres {
    /// One of this thread's readers of the database, in turn. A thread keeps up to
    /// [`READERS_PER_THREAD`] (PostgreSQL runs one statement at a time per connection). A
    /// missing one is made (connected, the read prepared) in a task of its own; reads use the
    /// readers there are meanwhile, and wait for the one being made only when the thread has
    /// none, so a read that stops waiting (its deadline) does not stop the connection either.
    async fn sticky_reader(&self) -> Result<Arc<PgReader>, StoreError> {
        let id = self.id;
        // Readers made since the last read join the thread's; finished attempts are forgotten
        // (a failed one is tried again now).
        let made: Vec<Arc<PgReader>> = PG_CONNECTING.with_borrow_mut(|pending| {
            let mut made = Vec::new();
            pending.retain(|(i, c)| {
                let outcome = c
                    .slot
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                match outcome {
                    Some(Ok(reader)) if *i == id => {
                        made.push(reader);
                        false
                    }
                    Some(_) => false,
                    None => true,
                }
            });
            made
        });
        let (live, pick) = PG_READERS.with_borrow_mut(|readers| {
            readers.retain(|(_, r)| !r.client.is_closed());
            for reader in made {
                if !readers.iter().any(|(_, r)| Arc::ptr_eq(r, &reader)) {
                    readers.push((id, reader));
                }
            }
            let mine: Vec<&Arc<PgReader>> = readers
                .iter()
                .filter(|(i, _)| *i == id)
                .map(|(_, r)| r)
                .collect();
            let turn = PG_TURN.with(|t| {
                let n = t.get();
                t.set(n.wrapping_add(1));
                n
            });
            let pick = (!mine.is_empty()).then(|| Arc::clone(mine[turn % mine.len()]));
            (mine.len(), pick)
        });
        let connecting = PG_CONNECTING.with_borrow_mut(|pending| {
            if let Some((_, c)) = pending.iter().find(|(i, _)| *i == id) {
                return Some(c.clone());
            }
            if live >= READERS_PER_THREAD {
                return None;
            }
            let connector = Arc::clone(&self.connector);
            let timeout = self.connect_timeout;
            let slot = Arc::new(std::sync::Mutex::new(None));
            let left = Arc::clone(&slot);
            let task = tokio::spawn(async move {
                let made: Made = async {
                    let client = connector.connect_client(timeout).await.map_err(|e| {
                        unavailable(Outage::Connection, format!("sticky reads: {e}"))
                    })?;
                    // A generic plan cannot know how many pairs the arrays hold and scans the
                    // table; a plan for each execution uses the primary key.
                    client
                        .batch_execute("SET plan_cache_mode = force_custom_plan")
                        .await
                        .map_err(|e| pg_read_error(&e))?;
                    let statement = client
                        .prepare(PG_READ)
                        .await
                        .map_err(|e| pg_read_error(&e))?;
                    Ok(Arc::new(PgReader { client, statement }))
                }
                .await;
                *left
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(made.clone());
                made
            });
            let shared: BoxFuture<'static, Made> = Box::pin(async move {
                task.await.unwrap_or_else(|e| {
                    Err(unavailable(
                        Outage::Connection,
                        format!("sticky reads: {e}"),
                    ))
                })
            });
            let connecting = Connecting {
                shared: shared.shared(),
                slot,
            };
            pending.push((id, connecting.clone()));
            Some(connecting)
        });
        if let Some(reader) = pick {
            return Ok(reader);
        }
        let Some(connecting) = connecting else {
            return Err(unavailable(
                Outage::Connection,
                "sticky reads: no connection".to_owned(),
            ));
        };
        let reader = connecting.shared.await?;
        // Installed on the thread the read finished on (with a runtime of several threads,
        // possibly not the one that started it).
        PG_READERS.with_borrow_mut(|readers| {
            if !readers
                .iter()
                .any(|(i, r)| *i == id && Arc::ptr_eq(r, &reader))
            {
                readers.push((id, Arc::clone(&reader)));
            }
        });
        Ok(reader)
    }

    /// The documents of each read's identifiers (at most `i32::MAX` reads): one query on
    /// this thread's reader. Dropping the future mid-query is harmless: the answer is read and
    /// discarded by the connection's task.
    async fn read_sticky_docs(
        &self,
        reads: &[(AppId, Vec<&StickyId>)],
    ) -> Result<Vec<StickyDocs>, StoreError> {
        let mut out = vec![StickyDocs::new(); reads.len()];
        let count: usize = reads.iter().map(|(_, ids)| ids.len()).sum();
        if count == 0 {
            return Ok(out);
        }
        let reader = self.sticky_reader().await?;
        let mut indexes: Vec<i32> = Vec::with_capacity(count);
        let mut apps: Vec<String> = Vec::with_capacity(count);
        let mut names: Vec<&str> = Vec::with_capacity(count);
        let mut values: Vec<&str> = Vec::with_capacity(count);
        for (i, (app, ids)) in reads.iter().enumerate() {
            let index = i32::try_from(i).map_err(|_| StoreError::Other {
                detail: format!("a combined sticky read of {} reads", reads.len()),
            })?;
            let app = app.0.to_string();
            for id in ids {
                indexes.push(index);
                apps.push(app.clone());
                names.push(&id.attribute_name);
                values.push(&id.attribute_value);
            }
        }
        let rows = reader
            .client
            .query(&reader.statement, &[&indexes, &apps, &names, &values])
            .await
            .map_err(|e| pg_read_error(&e))?;
        for row in rows {
            let read: i32 = row.get(0);
            let Some(docs) = usize::try_from(read).ok().and_then(|i| out.get_mut(i)) else {
                return Err(StoreError::Other {
                    detail: format!("a sticky read answered for read {read}, which was not asked"),
                });
            };
            let (key, variant): (String, String) = (row.get(3), row.get(4));
            if is_assignment(&key, &variant) {
                docs.assignments_mut(row.get(1), row.get(2))
                    .insert(key, variant);
            }
        }
        Ok(out)
    }
}
