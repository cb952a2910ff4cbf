//! [`RolloutStore`] on [`Store`] (D29): staged rollouts, the steps applied to them and the
//! scheduler's leases.
//!
//! - `rollouts`: one row per rollout, its fields in columns, its plan as JSON text, with the
//!   row's `format` (D26). A row of a later format is read all the same: a later version adds
//!   optional members only (see `flowgate_domain::rollouts`' Versions), which this release's
//!   plan decoding ignores.
//! - `rollout_steps`: one row per applied step, keyed by `(rollout_id, step_index)`: the key is
//!   what records a step at most once, whichever replica applies it, however many times. Its
//!   figures are JSON text.
//! - `scheduler_leases`: one row per lease, taken or renewed by one upsert that overwrites the
//!   row only when the lease is expired or already the same holder's, so of concurrent takers
//!   exactly one holds it.
//!
//! Reads take one snapshot (on PostgreSQL a repeatable-read transaction), so a rollout's state
//! and its steps always agree. [`insert_rollout_in`] and [`apply_step_in`] write inside a
//! caller's transaction: the catalog write that starts a rollout or applies its step commits
//! together with its record, or neither is written.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Double, Integer, Text};
use diesel::upsert::excluded;
use flowgate_domain::ids::{AppId, ExperimentId, FlowId, RolloutId, VariantId};
use flowgate_domain::ports::{BoxFuture, RolloutStore, StateChange, StoreError};
use flowgate_domain::rollouts::{AppliedStep, Rollout, RolloutState, ROLLOUT_FORMAT};
use time::OffsetDateTime;

use crate::db::{columns, Conn};
use crate::error::{corrupt, query_error, unstorable, TransactionError};
use crate::people::{from_bigint, optional_text, text, to_bigint};
use crate::schema::{rollout_steps as steps, rollouts, scheduler_leases as leases};
use crate::store::Store;
use crate::types::sql::Instant;
use crate::types::{DbTimestamp, DbUuid};

/// A rollout to insert.
#[derive(Insertable)]
#[diesel(table_name = rollouts, treat_none_as_default_value = false)]
struct NewRow<'a> {
    id: DbUuid,
    format: i32,
    app_id: DbUuid,
    placement: &'a str,
    experiment_id: DbUuid,
    control_variant: DbUuid,
    treatment_variant: DbUuid,
    from_flow: DbUuid,
    to_flow: DbUuid,
    to_version: Option<i32>,
    plan: String,
    state: &'static str,
    reason: Option<&'a str>,
    created_by: &'a str,
    created_at: DbTimestamp,
    updated_at: DbTimestamp,
}

/// A step to insert.
#[derive(Insertable)]
#[diesel(table_name = steps)]
struct NewStep {
    rollout_id: DbUuid,
    step_index: i32,
    share: f64,
    applied_at: DbTimestamp,
    revision: i64,
    figures: String,
}

impl NewStep {
    fn new(id: RolloutId, step: &AppliedStep) -> Result<Self, StoreError> {
        Ok(Self {
            rollout_id: DbUuid(id.0),
            step_index: i32::try_from(step.index)
                .map_err(|_| unstorable(format!("step index {} is too large", step.index)))?,
            share: step.share,
            applied_at: DbTimestamp(step.applied_at),
            revision: to_bigint(step.revision, "the step's revision")?,
            // serde_json escapes NUL, so the text never holds one.
            figures: serde_json::to_string(&step.figures).map_err(unstorable)?,
        })
    }
}

/// A rollout as read (every column but `format`: a later format is read alike).
#[derive(Queryable, Selectable)]
#[diesel(table_name = rollouts)]
struct Row {
    id: DbUuid,
    app_id: DbUuid,
    placement: String,
    experiment_id: DbUuid,
    control_variant: DbUuid,
    treatment_variant: DbUuid,
    from_flow: DbUuid,
    to_flow: DbUuid,
    to_version: Option<i32>,
    plan: String,
    state: String,
    reason: Option<String>,
    created_by: String,
    created_at: DbTimestamp,
    updated_at: DbTimestamp,
}

impl Row {
    fn into_rollout(self, applied: Vec<AppliedStep>) -> Result<Rollout, StoreError> {
        let id = RolloutId(self.id.0);
        Ok(Rollout {
            id,
            app_id: AppId(self.app_id.0),
            placement: self.placement,
            experiment_id: ExperimentId(self.experiment_id.0),
            control_variant: VariantId(self.control_variant.0),
            treatment_variant: VariantId(self.treatment_variant.0),
            from_flow: FlowId(self.from_flow.0),
            to_flow: FlowId(self.to_flow.0),
            to_version: self
                .to_version
                .map(|n| {
                    u32::try_from(n).map_err(|_| corrupt(format!("rollout {id} has version {n}")))
                })
                .transpose()?,
            plan: serde_json::from_str(&self.plan)
                .map_err(|e| corrupt(format!("rollout {id}'s plan does not decode: {e}")))?,
            state: self
                .state
                .parse()
                .map_err(|e| corrupt(format!("rollout {id}: {e}")))?,
            reason: self.reason,
            created_by: self.created_by,
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
            applied,
        })
    }
}

/// A step as read.
#[derive(Queryable, Selectable)]
#[diesel(table_name = steps)]
struct StepRow {
    rollout_id: DbUuid,
    step_index: i32,
    share: f64,
    applied_at: DbTimestamp,
    revision: i64,
    figures: String,
}

impl StepRow {
    fn into_step(self) -> Result<AppliedStep, StoreError> {
        let id = RolloutId(self.rollout_id.0);
        Ok(AppliedStep {
            index: u32::try_from(self.step_index)
                .map_err(|_| corrupt(format!("rollout {id} has step index {}", self.step_index)))?,
            share: self.share,
            applied_at: self.applied_at.0,
            revision: from_bigint(self.revision, "a step's revision")?,
            figures: serde_json::from_str(&self.figures)
                .map_err(|e| corrupt(format!("rollout {id}'s step figures are not JSON: {e}")))?,
        })
    }
}

/// The rollouts of `rows` with their steps (`steps` in index order; any rollout's).
fn assemble(rows: Vec<Row>, steps: Vec<StepRow>) -> Result<Vec<Rollout>, StoreError> {
    let mut applied: HashMap<uuid::Uuid, Vec<AppliedStep>> = HashMap::new();
    for step in steps {
        let id = step.rollout_id.0;
        applied.entry(id).or_default().push(step.into_step()?);
    }
    rows.into_iter()
        .map(|row| {
            let steps = applied.remove(&row.id.0).unwrap_or_default();
            row.into_rollout(steps)
        })
        .collect()
}

/// Makes the caller's (read) transaction one snapshot on PostgreSQL; SQLite in WAL mode reads
/// one snapshot per transaction by itself.
async fn snapshot(conn: &mut Conn<'_>) -> Result<(), TransactionError> {
    if let Conn::Postgres(_) = conn {
        conn.run(diesel::sql_query(
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
        ))
        .await?;
    }
    Ok(())
}

/// Inserts `rollout` and its applied steps on `conn`, inside the caller's transaction when it
/// has one (the catalog write that starts the rollout; the port's own otherwise). A taken id
/// (or two steps of one index) is [`StoreError::Conflict`], and then the caller's transaction
/// must roll back: on PostgreSQL the failed statement has aborted it.
pub(crate) async fn insert_rollout_in(
    conn: &mut Conn<'_>,
    rollout: &Rollout,
) -> Result<(), StoreError> {
    let row = NewRow {
        id: DbUuid(rollout.id.0),
        format: ROLLOUT_FORMAT as i32,
        app_id: DbUuid(rollout.app_id.0),
        placement: text(&rollout.placement, "rollout placement")?,
        experiment_id: DbUuid(rollout.experiment_id.0),
        control_variant: DbUuid(rollout.control_variant.0),
        treatment_variant: DbUuid(rollout.treatment_variant.0),
        from_flow: DbUuid(rollout.from_flow.0),
        to_flow: DbUuid(rollout.to_flow.0),
        to_version: rollout
            .to_version
            .map(|n| {
                i32::try_from(n).map_err(|_| unstorable(format!("flow version {n} is too large")))
            })
            .transpose()?,
        // serde_json escapes NUL, so the text never holds one.
        plan: serde_json::to_string(&rollout.plan).map_err(unstorable)?,
        state: rollout.state.as_str(),
        reason: optional_text(rollout.reason.as_ref(), "rollout reason")?,
        created_by: text(&rollout.created_by, "rollout author")?,
        created_at: DbTimestamp(rollout.created_at),
        updated_at: DbTimestamp(rollout.updated_at),
    };
    let steps = rollout
        .applied
        .iter()
        .map(|step| NewStep::new(rollout.id, step))
        .collect::<Result<Vec<_>, _>>()?;
    conn.run(diesel::insert_into(rollouts::table).values(&row))
        .await
        .map_err(query_error)?;
    // One statement per row: diesel-async cannot run multi-row inserts on SQLite.
    for step in &steps {
        conn.run(diesel::insert_into(steps::table).values(step))
            .await
            .map_err(query_error)?;
    }
    Ok(())
}

/// Records `step` of rollout `id` and, with `change`, moves the rollout from state `change.0`
/// to `change.1` (reason `change.2`, at `step.applied_at`), on `conn`, which must be in a
/// transaction: the catalog write's that applies the step, or the port's own. `true` when both
/// were written; `false` when the step is recorded already, the rollout is not in state
/// `change.0`, or there is no such rollout, and then nothing was written and the transaction
/// is still usable (the catalog write then rolls back with a conflict).
///
/// No statement fails on a step recorded already: a failed statement aborts a PostgreSQL
/// transaction. The step goes first, an `INSERT ... SELECT` from the rollout's row `ON
/// CONFLICT DO NOTHING` whose row count says whether it was recorded (on PostgreSQL a
/// concurrent insert of the same step waits for the first to commit, then inserts nothing; on
/// SQLite the statement is a write, so it takes the write lock at once). Then the state moves,
/// compare-and-set; when it does not, the step row just inserted is deleted again. That row
/// was never visible outside the transaction, so nothing is written, with no savepoint and no
/// error to roll back.
/// Moves rollout `id` from state `change.0` to `change.1` with its reason at `at`,
/// compare-and-set, inside the caller's transaction: `true` when it was in `change.0`; `false`
/// (nothing written) otherwise.
pub(crate) async fn set_state_in(
    conn: &mut Conn<'_>,
    id: RolloutId,
    (from, to, reason): &StateChange,
    at: OffsetDateTime,
) -> Result<bool, StoreError> {
    let moved = conn
        .run(
            diesel::update(
                rollouts::table
                    .find(DbUuid(id.0))
                    .filter(rollouts::state.eq(from.as_str())),
            )
            .set((
                rollouts::state.eq(to.as_str()),
                rollouts::reason.eq(optional_text(reason.as_ref(), "rollout reason")?),
                rollouts::updated_at.eq(DbTimestamp(at)),
            )),
        )
        .await
        .map_err(query_error)?;
    Ok(moved == 1)
}

pub(crate) async fn apply_step_in(
    conn: &mut Conn<'_>,
    id: RolloutId,
    step: &AppliedStep,
    change: Option<&StateChange>,
) -> Result<bool, StoreError> {
    let new = NewStep::new(id, step)?;
    // The reason is checked before anything is written.
    if let Some((_, _, reason)) = change {
        optional_text(reason.as_ref(), "rollout reason")?;
    }
    let key = (new.rollout_id, new.step_index);
    let inserted = conn
        .run(
            diesel::insert_into(steps::table)
                .values(rollouts::table.find(new.rollout_id).select((
                    rollouts::id,
                    new.step_index.into_sql::<Integer>(),
                    new.share.into_sql::<Double>(),
                    new.applied_at.into_sql::<Instant>(),
                    new.revision.into_sql::<BigInt>(),
                    new.figures.into_sql::<Text>(),
                )))
                .into_columns((
                    steps::rollout_id,
                    steps::step_index,
                    steps::share,
                    steps::applied_at,
                    steps::revision,
                    steps::figures,
                ))
                .on_conflict_do_nothing(),
        )
        .await
        .map_err(query_error)?;
    if inserted == 0 {
        return Ok(false);
    }
    if let Some(change) = change {
        if !set_state_in(conn, id, change, step.applied_at).await? {
            conn.run(diesel::delete(steps::table.find(key)))
                .await
                .map_err(query_error)?;
            return Ok(false);
        }
    }
    Ok(true)
}

impl RolloutStore for Store {
    fn insert_rollout(&self, rollout: Rollout) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let rollout = &rollout;
            self.db()
                .transaction(async |conn| Ok(insert_rollout_in(conn, rollout).await?))
                .await
        })
    }

    fn rollout(&self, id: RolloutId) -> BoxFuture<'_, Result<Option<Rollout>, StoreError>> {
        Box::pin(async move {
            let id = DbUuid(id.0);
            let (rows, steps) = self
                .db()
                .transaction(async |conn| {
                    snapshot(conn).await?;
                    let rows: Vec<Row> = conn
                        .rows(rollouts::table.find(id).select(columns::<Row>()))
                        .await?;
                    let steps: Vec<StepRow> = conn
                        .rows(
                            steps::table
                                .filter(steps::rollout_id.eq(id))
                                .order(steps::step_index)
                                .select(columns::<StepRow>()),
                        )
                        .await?;
                    Ok((rows, steps))
                })
                .await?;
            Ok(assemble(rows, steps)?.into_iter().next())
        })
    }

    fn list_rollouts(
        &self,
        state: Option<RolloutState>,
    ) -> BoxFuture<'_, Result<Vec<Rollout>, StoreError>> {
        Box::pin(async move {
            let newest_first = (rollouts::created_at.desc(), rollouts::id.desc());
            let by_index = (steps::rollout_id, steps::step_index);
            let (rows, steps) = self
                .db()
                .transaction(async |conn| {
                    snapshot(conn).await?;
                    Ok(match state {
                        Some(state) => {
                            let of_state =
                                rollouts::table.filter(rollouts::state.eq(state.as_str()));
                            let rows: Vec<Row> = conn
                                .rows(of_state.order(newest_first).select(columns::<Row>()))
                                .await?;
                            let steps: Vec<StepRow> = conn
                                .rows(
                                    steps::table
                                        .filter(
                                            steps::rollout_id.eq_any(of_state.select(rollouts::id)),
                                        )
                                        .order(by_index)
                                        .select(columns::<StepRow>()),
                                )
                                .await?;
                            (rows, steps)
                        }
                        None => {
                            let rows: Vec<Row> = conn
                                .rows(rollouts::table.order(newest_first).select(columns::<Row>()))
                                .await?;
                            let steps: Vec<StepRow> = conn
                                .rows(steps::table.order(by_index).select(columns::<StepRow>()))
                                .await?;
                            (rows, steps)
                        }
                    })
                })
                .await?;
            assemble(rows, steps)
        })
    }

    fn apply_step(
        &self,
        id: RolloutId,
        step: AppliedStep,
        change: Option<StateChange>,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let (step, change) = (&step, change.as_ref());
            self.db()
                .transaction(async |conn| Ok(apply_step_in(conn, id, step, change).await?))
                .await
        })
    }

    fn set_rollout_state(
        &self,
        id: RolloutId,
        change: StateChange,
        at: OffsetDateTime,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            self.db()
                .transaction(async |conn| Ok(set_state_in(conn, id, &change, at).await?))
                .await
        })
    }

    fn take_lease<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
        now: OffsetDateTime,
        ttl: std::time::Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let until = time::Duration::try_from(ttl)
                .ok()
                .and_then(|ttl| now.checked_add(ttl))
                .ok_or_else(|| unstorable(format!("a lease of {ttl:?} ends too late")))?;
            // One statement: a new row is inserted; a stored one is overwritten only when it
            // is this holder's or expired at `now`, else no row changes. Concurrent takers are
            // serialised on the row (PostgreSQL) or the database (SQLite), so one holds it.
            let upsert = diesel::insert_into(leases::table)
                .values((
                    leases::name.eq(text(name, "lease name")?),
                    leases::holder.eq(text(holder, "lease holder")?),
                    leases::expires_at.eq(DbTimestamp(until)),
                ))
                .on_conflict(leases::name)
                .do_update()
                .set((
                    leases::holder.eq(excluded(leases::holder)),
                    leases::expires_at.eq(excluded(leases::expires_at)),
                ));
            // `DO UPDATE ... WHERE`: diesel's `FilterDsl` on the insert (the prelude's
            // `QueryDsl::filter` is for selects).
            let guarded = diesel::query_dsl::methods::FilterDsl::filter(
                upsert,
                leases::holder
                    .eq(holder)
                    .or(leases::expires_at.le(DbTimestamp(now))),
            );
            let taken = self.db().run(guarded).await?;
            Ok(taken == 1)
        })
    }

    fn release_lease<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.db()
                .run(diesel::delete(
                    leases::table.find(name).filter(leases::holder.eq(holder)),
                ))
                .await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use flowgate_domain::rollouts::RolloutPlan;
    use serde_json::json;

    use super::*;
    use crate::StoreOptions;

    /// A row of a later format, its plan with a member this release does not know, reads as
    /// the rollout it holds (D26: a later version adds optional members only).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_later_format_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/rollouts.db", dir.path().display());
        let store = Store::connect(&url, StoreOptions::default()).unwrap();
        store.migrate().await.unwrap();
        let id = |n: u128| uuid::Uuid::from_u128(0x7000_0000_0000_4000_8000_0000_0000_0000 + n);
        let started = time::macros::datetime!(2026-12-06 10:00:00.000001 UTC);
        let rollout = Rollout {
            id: RolloutId(id(1)),
            app_id: AppId(id(2)),
            placement: "paywall".to_owned(),
            experiment_id: ExperimentId(id(3)),
            control_variant: VariantId(id(4)),
            treatment_variant: VariantId(id(5)),
            from_flow: FlowId(id(6)),
            to_flow: FlowId(id(7)),
            to_version: None,
            plan: RolloutPlan::default(),
            state: RolloutState::Running,
            reason: None,
            created_by: "cli".to_owned(),
            created_at: started,
            updated_at: started,
            applied: vec![AppliedStep {
                index: 0,
                share: 1.0,
                applied_at: started,
                revision: 7,
                figures: serde_json::Value::Null,
            }],
        };
        store.insert_rollout(rollout.clone()).await.unwrap();
        let mut plan = serde_json::to_value(&rollout.plan).unwrap();
        plan["ramp"] = json!({"kind": "linear", "every": "1h"});
        store
            .db()
            .run(diesel::update(rollouts::table).set((
                rollouts::format.eq(ROLLOUT_FORMAT as i32 + 1),
                rollouts::plan.eq(plan.to_string()),
            )))
            .await
            .unwrap();
        assert_eq!(
            store.rollout(rollout.id).await.unwrap(),
            Some(rollout.clone())
        );
        assert_eq!(store.list_rollouts(None).await.unwrap(), [rollout]);
    }
}
