//! The catalog's writers: [`Store::replace_catalog`] and the import's read-plan-write
//! transaction under the catalog's write lock (D13).

use flowgate_domain::catalog::CatalogData;
use flowgate_domain::ports::StoreError;

use super::read::{assemble, load_rows};
use super::write::{write_rows, WriteRows};
use super::{decode_revision, revision_query};
use crate::history::{ImportEntry, RolloutWrite};
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

    /// Reads the catalog as stored, lets `plan` decide what to write, and writes it, all in one
    /// transaction that holds the catalog write lock from its first statement: what `plan` saw
    /// is what the write lands on (the catalog import, D13). `plan` returns the data to write
    /// with [`Store::replace_catalog`]'s upsert together with the import's history entry
    /// (`None`: nothing is written), and a value, or an error that ends the transaction
    /// without writing. A write is recorded in `catalog_imports` with the revision it left, in
    /// the same transaction (D19), as are its audit entry and the decision of the reviewed
    /// change it applies (D28). On success the revision after the write comes back with the
    /// value.
    pub(crate) async fn update_catalog<T, E, P>(
        &self,
        plan: P,
    ) -> Result<Result<(T, u64), E>, StoreError>
    where
        P: FnOnce(CatalogData) -> Result<(Option<(CatalogData, ImportEntry)>, T), E> + Send,
        T: Send,
        E: Send,
    {
        self.db()
            .transaction(async |conn| {
                conn.run(diesel::sql_query(LOCK_CATALOG)).await?;
                let data = assemble(load_rows(conn).await?)?;
                let before = data.revision;
                let (write, value) = match plan(data) {
                    Ok(planned) => planned,
                    Err(e) => return Ok(Err(e)),
                };
                let written = match write {
                    Some((data, entry)) => {
                        write_rows(conn, &WriteRows::from_data(&data)?).await?;
                        Some(entry)
                    }
                    None => None,
                };
                let revision = conn.row(revision_query()).await?;
                let after = decode_revision(revision)?;
                if let Some(entry) = written {
                    conn.run(
                        diesel::insert_into(catalog_imports::table).values(entry.row(revision)?),
                    )
                    .await?;
                    if let Some(mut audit) = entry.audit {
                        audit.revision_before = Some(before);
                        audit.revision_after = Some(after);
                        crate::audit::insert_audit_in(conn, &audit).await?;
                    }
                    if let Some((id, mut decision)) = entry.decision {
                        decision.applied_revision = Some(after);
                        if !crate::changes::decide_change_in(conn, id, &decision).await? {
                            return Err(StoreError::Conflict {
                                detail: format!("change {id} was decided meanwhile"),
                            }
                            .into());
                        }
                    }
                    match entry.rollout {
                        None => {}
                        Some(RolloutWrite::Start(mut rollout)) => {
                            for step in &mut rollout.applied {
                                step.revision = after;
                            }
                            crate::rollouts::insert_rollout_in(conn, &rollout).await?;
                        }
                        Some(RolloutWrite::Step {
                            id,
                            mut step,
                            change,
                        }) => {
                            step.revision = after;
                            let index = step.index;
                            if !crate::rollouts::apply_step_in(conn, id, &step, change.as_ref())
                                .await?
                            {
                                return Err(StoreError::Conflict {
                                    detail: format!(
                                        "step {} of rollout {id} was applied meanwhile, or the \
                                         rollout left the state it was in",
                                        index + 1
                                    ),
                                }
                                .into());
                            }
                        }
                        Some(RolloutWrite::State { id, change }) => {
                            let at = entry.imported_at;
                            if !crate::rollouts::set_state_in(conn, id, &change, at).await? {
                                return Err(StoreError::Conflict {
                                    detail: format!(
                                        "the state of rollout {id} changed meanwhile (it is no \
                                         longer {})",
                                        change.0
                                    ),
                                }
                                .into());
                            }
                        }
                    }
                }
                Ok(Ok((value, after)))
            })
            .await
    }
}

/// Takes the catalog's write lock at the start of a transaction: on SQLite any write makes the
/// transaction the one writer; on PostgreSQL the revision row stays locked until commit, and
/// every other catalog writer needs that row (its triggers bump it), so none can commit in
/// between. No trigger watches this table, so the statement itself changes no revision.
pub(super) const LOCK_CATALOG: &str =
    "UPDATE catalog_revision SET revision = revision WHERE id = 1";
