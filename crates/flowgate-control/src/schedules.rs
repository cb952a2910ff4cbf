//! Scheduled catalog changes (D29): a pending change (D28) with an `apply_at` is applied by the
//! scheduler once its time has come, as `scheduler`, to the catalog as it is then (the dry run
//! recomputed), through the one write path with the change's decision in the same transaction:
//! of any number of replicas trying, one applies it, once. A change that no longer applies (an
//! experiment gone, nothing left to change) is marked `failed` with why; one that meets a
//! concurrent write (stale) or a store failure is tried again at the next pass. The same
//! pass starts and concludes experiments on their `starts_at` and `ends_at`
//! ([`apply_experiment_schedules`]).

use crate::changes::{apply_change, preview_change, ChangeFailure};
use crate::ControlStore;
use flowgate_domain::catalog::{CatalogChange, ChangeError, ExperimentStatus};
use flowgate_domain::ids::{ChangeId, ExperimentId};
use flowgate_domain::people::{
    AuditAction, ChangeDecision, ChangeRecord, ChangeState, NewAuditEntry,
};
use flowgate_domain::ports::StoreError;
use flowgate_domain::rollouts::SCHEDULER_ACTOR;
use flowgate_domain::text::rfc3339;
use time::OffsetDateTime;

/// Most changes one pass applies.
const PER_PASS: usize = 20;

/// Applies the experiments' schedules (D29) due at `now`: a `draft` experiment whose
/// `starts_at` has come is started, one whose `ends_at` has come is concluded, each as its own
/// catalog change through the one write path, as `scheduler` with the time it was due in the
/// comment. Of any number of replicas trying, one applies each: the others find the catalog
/// changed (tried again next pass, when nothing is left to do) or the status set already.
///
/// `watch` spares the whole catalog's read (millions of instructions and a large answer from the
/// store at scale) on a pass where nothing can be due: the catalog's revision is the one the
/// last pass read, which found nothing due, and no experiment's `starts_at` or `ends_at` has
/// come since. Then the pass reads only the revision.
pub async fn apply_experiment_schedules(
    store: &dyn ControlStore,
    now: OffsetDateTime,
    watch: &mut ScheduleWatch,
) -> Result<Vec<(ExperimentId, DueOutcome)>, StoreError> {
    if let Some((revision, next)) = watch.idle {
        if next.is_none_or(|at| now < at) && store.revision().await? == revision {
            return Ok(Vec::new());
        }
    }
    watch.idle = None;
    let stored = store.load_catalog().await?;
    let due: Vec<_> = stored
        .experiments()
        .filter_map(|e| {
            let status = e.scheduled_status(now)?;
            let at = if status == ExperimentStatus::Running {
                e.starts_at
            } else {
                e.ends_at
            };
            Some((e.id, status, at?))
        })
        .take(PER_PASS)
        .collect();
    if due.is_empty() {
        let next = stored
            .experiments()
            .flat_map(|e| [e.starts_at, e.ends_at])
            .flatten()
            .filter(|at| *at > now)
            .min();
        watch.idle = Some((stored.revision, next));
    }
    let mut done = Vec::with_capacity(due.len());
    let mut base = stored.revision;
    for (experiment, status, at) in due {
        let change = CatalogChange::SetExperimentStatus { experiment, status };
        let member = if status == ExperimentStatus::Running {
            "starts_at"
        } else {
            "ends_at"
        };
        let comment = format!("scheduled: the experiment's {member} {}", rfc3339(at));
        let outcome =
            match apply_change(store, &change, base, SCHEDULER_ACTOR, &comment, None, now).await {
                Ok(applied) => {
                    base = applied.revision;
                    DueOutcome::Applied(applied.revision)
                }
                Err(ChangeFailure::Change(ChangeError::NoChange(why))) => DueOutcome::Later(why),
                Err(e @ (ChangeFailure::Stale { .. } | ChangeFailure::Store(_))) => {
                    DueOutcome::Later(e.to_string())
                }
                // A schedule the catalog does not allow (a concluded experiment cannot be started):
                // said, and left to a person; it is not tried again while the catalog holds it.
                Err(e) => DueOutcome::Failed(e.to_string()),
            };
        let stop = matches!(outcome, DueOutcome::Later(_));
        done.push((experiment, outcome));
        if stop {
            break;
        }
    }
    Ok(done)
}

/// What the last pass of [`apply_experiment_schedules`] found when nothing was due: the catalog
/// revision it read and the earliest `starts_at` or `ends_at` after it (none: no schedule).
#[derive(Debug, Default)]
pub struct ScheduleWatch {
    idle: Option<(u64, Option<OffsetDateTime>)>,
}

/// What a pass did with one due change.
#[derive(Clone, Debug, PartialEq)]
pub enum DueOutcome {
    /// Applied, leaving this catalog revision.
    Applied(u64),
    /// It no longer applies: marked failed, why.
    Failed(String),
    /// Not now (a concurrent write, the store, another replica): tried again, why.
    Later(String),
}

/// Applies the changes due at `now`, the earliest first.
pub async fn apply_due(
    store: &dyn ControlStore,
    now: OffsetDateTime,
) -> Result<Vec<(ChangeId, DueOutcome)>, StoreError> {
    let due = store.due_changes(now, PER_PASS).await?;
    let mut done = Vec::with_capacity(due.len());
    for record in due {
        let outcome = apply_one(store, &record, now).await;
        done.push((record.id, outcome));
    }
    Ok(done)
}

async fn apply_one(
    store: &dyn ControlStore,
    record: &ChangeRecord,
    now: OffsetDateTime,
) -> DueOutcome {
    let change = match CatalogChange::from_json(&record.change) {
        Ok(change) => change,
        Err(e) => return fail(store, record.id, e.to_string(), now).await,
    };
    let base = match store.load_catalog().await {
        Ok(stored) => stored.revision,
        Err(e) => return DueOutcome::Later(e.to_string()),
    };
    let decision = ChangeDecision {
        state: ChangeState::Applied,
        by: SCHEDULER_ACTOR.to_owned(),
        at: now,
        applied_revision: None,
        note: None,
    };
    let comment = scheduled_comment(record);
    match apply_change(
        store,
        &change,
        base,
        SCHEDULER_ACTOR,
        &comment,
        Some((record.id, decision)),
        now,
    )
    .await
    {
        Ok(applied) => DueOutcome::Applied(applied.revision),
        Err(e @ (ChangeFailure::Stale { .. } | ChangeFailure::Store(_))) => {
            DueOutcome::Later(e.to_string())
        }
        Err(ChangeFailure::Decided) => DueOutcome::Later("decided meanwhile".to_owned()),
        Err(e) => fail(store, record.id, e.to_string(), now).await,
    }
}

/// The audit entry's comment: the author's, and who scheduled it.
fn scheduled_comment(record: &ChangeRecord) -> String {
    let by = format!("scheduled by {}", record.author);
    if record.comment.is_empty() {
        by
    } else {
        format!("{} ({by})", record.comment)
    }
}

async fn fail(
    store: &dyn ControlStore,
    id: ChangeId,
    why: String,
    now: OffsetDateTime,
) -> DueOutcome {
    let decision = ChangeDecision {
        state: ChangeState::Failed,
        by: SCHEDULER_ACTOR.to_owned(),
        at: now,
        applied_revision: None,
        note: Some(why.clone()),
    };
    match store.decide_change(id, decision).await {
        Ok(true) => DueOutcome::Failed(why),
        Ok(false) => DueOutcome::Later("decided meanwhile".to_owned()),
        Err(e) => DueOutcome::Later(e.to_string()),
    }
}

/// Why a change could not be scheduled.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleFailure {
    /// The change does not apply to the catalog now (or its JSON is no change).
    #[error("{0}")]
    Invalid(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Schedules `change` for `at` as `author` with `comment`: checked against the catalog now
/// (its dry run must apply), stored pending with its time, and recorded (`change.propose`).
pub async fn schedule(
    store: &dyn ControlStore,
    change: &CatalogChange,
    at: OffsetDateTime,
    author: &str,
    comment: &str,
    now: OffsetDateTime,
) -> Result<ChangeRecord, ScheduleFailure> {
    let preview = match preview_change(store, change, now).await {
        Ok(preview) => preview,
        Err(ChangeFailure::Store(e)) => return Err(e.into()),
        Err(e) => return Err(ScheduleFailure::Invalid(e.to_string())),
    };
    let record = ChangeRecord {
        id: ChangeId::new_v7(now),
        author: author.to_owned(),
        created_at: now,
        base_revision: preview.revision,
        change: change.to_json(),
        summary: preview.description.clone(),
        comment: comment.to_owned(),
        state: ChangeState::Pending,
        decided_by: None,
        decided_at: None,
        applied_revision: None,
        note: None,
        apply_at: Some(at),
    };
    store.insert_change(record.clone()).await?;
    let entry = NewAuditEntry {
        at: now,
        actor: author.to_owned(),
        action: AuditAction::ChangePropose,
        target: Some(record.id.to_string()),
        comment: Some(comment.to_owned()).filter(|c| !c.is_empty()),
        revision_before: None,
        revision_after: None,
        detail: serde_json::json!({
            "description": preview.description,
            "apply_at": flowgate_domain::text::rfc3339(at),
        }),
    };
    if let Err(e) = store.append_audit(entry).await {
        tracing::error!(error = %e, change = %record.id, "the change's audit entry could not be written");
    }
    Ok(record)
}
