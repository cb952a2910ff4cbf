//! The catalog's writers: [`Store::replace_catalog`] and the one write path
//! ([`CatalogWriter`]) under the catalog's write lock (D13).

use flowgate_domain::catalog::CatalogData;
use flowgate_domain::ports::{
    BoxFuture, CatalogRecord, CatalogWriteError, CatalogWriter, ImportRecord, RolloutWrite,
    StoreError,
};

use super::write::{write_rows, WriteRows};
use super::{decode_revision, revision_query};
use crate::history::import_row;
use crate::schema::catalog_imports;
use crate::store::Store;

impl Store {
    /// Writes `data` in one transaction: an idempotent upsert keyed by ids (workspaces, apps,
    /// flows, versions, experiments, variants, keys), placements keyed by `(app, key)`, and each
    /// placement's rule list replaced by the one given. Nothing absent from `data` is deleted,
    /// except rules (and the variants of the experiments given). Keys already revoked stay
    /// revoked. `data.revision` is ignored: the triggers bump the stored one.
    ///
    /// This is the writer of the catalog import (D13); it does not validate (call
    /// [`flowgate_domain::Catalog::build`] first), but the schema's constraints reject dangling
    /// references ([`StoreError::NotFound`]) and duplicates ([`StoreError::Conflict`]), and then
    /// nothing is written.
    pub async fn replace_catalog(&self, data: &CatalogData) -> Result<(), StoreError> {
        let rows = WriteRows::from_data(data)?;
        let rows = &rows;
        // One statement per row: diesel-async cannot run diesel's multi-row inserts on SQLite
        // (only synchronous diesel special-cases them), and a catalog write is rare and small
        // next to event writes. On SQLite the first statement is a write, so the transaction
        // takes the write lock at once (waiting up to busy_timeout) instead of failing when a
        // read snapshot would have to be upgraded.
        self.db()
            .transaction(async |conn| write_rows(conn, rows).await)
            .await
    }
}

impl CatalogWriter for Store {
    /// One transaction that holds the catalog write lock from its first statement: the stored
    /// revision is compared with `base` under the lock, so what the write was planned on is
    /// what it lands on. The write is recorded in `catalog_imports` with the revision it left
    /// (D19), with its audit entry, the decision of the reviewed change it applies (D28) and
    /// its rollout's record (D29).
    fn write_catalog(
        &self,
        base: u64,
        data: CatalogData,
        record: CatalogRecord,
    ) -> BoxFuture<'_, Result<u64, CatalogWriteError>> {
        Box::pin(async move {
            // Set when the record cannot be kept (a change decided, a rollout moved
            // meanwhile): the transaction is then rolled back by an error.
            let moved = std::sync::OnceLock::new();
            let (data, moved_ref) = (&data, &moved);
            let written = self
                .db()
                .transaction(async |conn| {
                    conn.run(diesel::sql_query(LOCK_CATALOG)).await?;
                    let before = decode_revision(conn.row(revision_query()).await?)?;
                    if before != base {
                        return Ok(Err(before));
                    }
                    write_rows(conn, &WriteRows::from_data(data)?).await?;
                    let revision = conn.row(revision_query()).await?;
                    let after = decode_revision(revision)?;
                    conn.run(
                        diesel::insert_into(catalog_imports::table)
                            .values(import_row(&record, revision)?),
                    )
                    .await?;
                    if let Some(moved) = record_in(conn, record, before, after).await? {
                        let detail = moved.to_string();
                        let _ = moved_ref.set(moved);
                        return Err(StoreError::Conflict { detail }.into());
                    }
                    Ok(Ok(after))
                })
                .await;
            match (written, moved.into_inner()) {
                (Ok(Ok(after)), _) => Ok(after),
                (Ok(Err(current)), _) => Err(CatalogWriteError::Stale { base, current }),
                (Err(_), Some(moved)) => Err(moved),
                (Err(e), None) => Err(CatalogWriteError::Store(e)),
            }
        })
    }

    fn catalog_history(
        &self,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<ImportRecord>, StoreError>> {
        Box::pin(self.read_history(limit))
    }
}

/// The audit entry, decision and rollout record of a write that moved the catalog from
/// `before` to `after`, in its transaction; `Some(why)` when the decision or the rollout
/// cannot be recorded (decided or moved meanwhile), and the write must be undone.
async fn record_in(
    conn: &mut crate::db::Conn<'_>,
    record: CatalogRecord,
    before: u64,
    after: u64,
) -> Result<Option<CatalogWriteError>, StoreError> {
    if let Some(mut audit) = record.audit {
        audit.revision_before = Some(before);
        audit.revision_after = Some(after);
        crate::audit::insert_audit_in(conn, &audit).await?;
    }
    if let Some((id, mut decision)) = record.decision {
        decision.applied_revision = Some(after);
        if !crate::changes::decide_change_in(conn, id, &decision).await? {
            return Ok(Some(CatalogWriteError::Decided(id)));
        }
    }
    let moved = match record.rollout {
        None => None,
        Some(RolloutWrite::Start(mut rollout)) => {
            for step in &mut rollout.applied {
                step.revision = after;
            }
            crate::rollouts::insert_rollout_in(conn, &rollout).await?;
            None
        }
        Some(RolloutWrite::Step {
            id,
            mut step,
            change,
        }) => {
            step.revision = after;
            let index = step.index;
            let applied = crate::rollouts::apply_step_in(conn, id, &step, change.as_ref()).await?;
            (!applied).then(|| CatalogWriteError::step_taken(id, index))
        }
        Some(RolloutWrite::State { id, change }) => {
            let set = crate::rollouts::set_state_in(conn, id, &change, record.at).await?;
            (!set).then(|| CatalogWriteError::state_moved(id, change.0))
        }
    };
    Ok(moved)
}

/// Takes the catalog's write lock at the start of a transaction: on SQLite any write makes the
/// transaction the one writer; on PostgreSQL the revision row stays locked until commit, and
/// every other catalog writer needs that row (its triggers bump it), so none can commit in
/// between. No trigger watches this table, so the statement itself changes no revision.
pub(super) const LOCK_CATALOG: &str =
    "UPDATE catalog_revision SET revision = revision WHERE id = 1";
