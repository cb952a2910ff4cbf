//! Changing the catalog (D28): a console or CLI change previewed and applied through the
//! catalog's one write path ([`CatalogWriter`]), with who did it and why in the audit log, and
//! the reviewed change, schedule or rollout it applies recorded in the same write.

use flowgate_domain::catalog::{
    plan_dry_run, CatalogChange, CatalogDiff, ChangeError, DryRun, Problem,
};
use flowgate_domain::ids::ChangeId;
use flowgate_domain::people::{AuditAction, ChangeDecision, NewAuditEntry};
use flowgate_domain::ports::{
    CatalogRecord, CatalogWriteError, CatalogWriter, RolloutWrite, StoreError,
};
use time::OffsetDateTime;

use crate::import::sha256_hex;

/// What a console change (D28) would do: the catalog revision it is made on, what it changes
/// (the D19 dry run: users moved per experiment) and its description.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangePreview {
    /// The stored revision the preview was made on: the change's base.
    pub revision: u64,
    /// What would change.
    pub diff: CatalogDiff,
    /// One line for people.
    pub description: String,
    /// The import's warnings.
    pub warnings: Vec<String>,
}

/// A console change applied (D28).
#[derive(Clone, Debug, PartialEq)]
pub struct AppliedChange {
    /// The revision it was made on.
    pub revision_before: u64,
    /// The revision it left.
    pub revision: u64,
    /// What it changed.
    pub diff: CatalogDiff,
    /// One line for people.
    pub description: String,
}

/// Why a console change was not previewed or applied. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ChangeFailure {
    /// The catalog changed since the change was made (another change, an import, a schedule).
    #[error(
        "the catalog changed since this change was made (revision {base}; it is at {current} \
         now): nothing was written; look at the change again on the current catalog"
    )]
    Stale {
        /// The revision the change was made on.
        base: u64,
        /// The stored revision.
        current: u64,
    },
    /// The change does not fit the catalog (an unknown experiment, a holdout shipped, ...).
    #[error(transparent)]
    Change(#[from] ChangeError),
    /// The catalog after the change would not be valid.
    #[error("the catalog after this change would not be valid: {}", .0.iter().map(|p| format!("{}: {}", p.pointer, p.message)).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Problem>),
    /// The reviewed change was decided (applied, withdrawn) meanwhile.
    #[error("this change was decided meanwhile; nothing was written")]
    Decided,
    /// The rollout's step was recorded meanwhile (by another replica), or the rollout left the
    /// state the write expected (D29); nothing was written.
    #[error("{0}; nothing was written")]
    RolloutMoved(String),
    /// A `start_rollout` change applied as a plain catalog change: a rollout starts through
    /// `flowgate rollouts start` or the console's rollouts page (with review, by approving its
    /// proposal), which record the rollout with it.
    #[error(
        "a start_rollout change starts a rollout: use flowgate rollouts start or the console's \
         rollouts page (with review, approve the rollout's proposal); nothing was written"
    )]
    RolloutOnly,
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

impl ChangeFailure {
    /// A stable code for the failure (`stale_base`, the change error's, `invalid_catalog`,
    /// `already_decided`, `rollout_moved`, `rollout_only`, `store`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Stale { .. } => "stale_base",
            Self::Change(e) => e.code(),
            Self::Invalid(_) => "invalid_catalog",
            Self::Decided => "already_decided",
            Self::RolloutMoved(_) => "rollout_moved",
            Self::RolloutOnly => "rollout_only",
            Self::Store(_) => "store",
        }
    }
}

impl From<StoreError> for ChangeFailure {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl From<CatalogWriteError> for ChangeFailure {
    fn from(e: CatalogWriteError) -> Self {
        match e {
            CatalogWriteError::Stale { base, current } => Self::Stale { base, current },
            CatalogWriteError::Decided(_) => Self::Decided,
            CatalogWriteError::RolloutMoved(detail) => Self::RolloutMoved(detail),
            CatalogWriteError::Store(e) => Self::Store(e),
        }
    }
}

/// The users a diff moves, per experiment, as the audit log keeps them.
fn moved_json(diff: &CatalogDiff) -> serde_json::Value {
    let status = |s: Option<flowgate_domain::catalog::ExperimentStatus>| s.map(|s| s.as_str());
    serde_json::Value::Array(
        diff.experiments
            .iter()
            .map(|e| {
                serde_json::json!({
                    "experiment_id": e.id.to_string(), "name": e.name,
                    "placement": e.placement_key,
                    "status_before": status(e.status_before), "status_after": status(e.status_after),
                    "change_variant": e.change_variant, "enter": e.enter, "leave": e.leave,
                })
            })
            .collect(),
    )
}

/// What `change` would do to the stored catalog (D28's preview, D19's dry run); nothing is
/// written.
pub async fn preview_change(
    store: &dyn CatalogWriter,
    change: &CatalogChange,
    now: OffsetDateTime,
) -> Result<ChangePreview, ChangeFailure> {
    let stored = store.load_catalog().await?;
    let file = change.apply(&stored)?;
    let DryRun { plan, diff } = plan_dry_run(file, &stored, now).map_err(ChangeFailure::Invalid)?;
    Ok(ChangePreview {
        revision: stored.revision,
        diff,
        description: change.describe(&stored),
        warnings: plan.warnings.into_iter().map(|w| w.message).collect(),
    })
}

/// Applies `change`, made on catalog revision `base`, through the catalog's one write path
/// (validation, revision, replicas notified, history), recording who did it and why in the
/// audit log, and the reviewed change's `decision` when it is one, all in one transaction. A
/// catalog changed since `base` is [`ChangeFailure::Stale`] and nothing is written.
pub async fn apply_change(
    store: &dyn CatalogWriter,
    change: &CatalogChange,
    base: u64,
    actor: &str,
    comment: &str,
    decision: Option<(ChangeId, ChangeDecision)>,
    now: OffsetDateTime,
) -> Result<AppliedChange, ChangeFailure> {
    // A rollout's experiment without its rollout record would run with nobody stepping it:
    // a start goes through the rollouts' own write (`ChangeWrite::rollout`), never this one.
    if matches!(change, CatalogChange::StartRollout { .. }) {
        return Err(ChangeFailure::RolloutOnly);
    }
    let write = ChangeWrite {
        actor,
        comment,
        action: AuditAction::CatalogChange,
        detail: serde_json::Value::Null,
        decision,
        rollout: None,
    };
    apply_change_with(store, change, base, write, now).await
}

/// What a change's write records beside the catalog: who, why, as which audit action (with
/// `detail`'s members added to the entry's), and the reviewed change or rollout it applies.
#[derive(Clone, Debug)]
pub struct ChangeWrite<'a> {
    /// Who: an email, `cli`, `scheduler`.
    pub actor: &'a str,
    /// Why, in their words (empty: none).
    pub comment: &'a str,
    /// The audit entry's action.
    pub action: AuditAction,
    /// Members added to the audit entry's detail (an object; anything else adds nothing).
    pub detail: serde_json::Value,
    /// The reviewed change this applies (D28).
    pub decision: Option<(ChangeId, ChangeDecision)>,
    /// The rollout this starts or steps (D29): a step recorded meanwhile fails the write
    /// ([`ChangeFailure::RolloutMoved`]) and nothing is written.
    pub rollout: Option<RolloutWrite>,
}

/// [`apply_change`] with what the write records spelled out ([`ChangeWrite`]): rollouts'
/// steps (D29) go through here, keyed so each is recorded once.
pub async fn apply_change_with(
    store: &dyn CatalogWriter,
    change: &CatalogChange,
    base: u64,
    write: ChangeWrite<'_>,
    now: OffsetDateTime,
) -> Result<AppliedChange, ChangeFailure> {
    let change_json = change.to_json();
    let actor = write.actor.to_owned();
    let comment = write.comment.to_owned();
    let decision = write.decision;
    let rollout = write.rollout;
    let action = write.action;
    let extra = write.detail;
    let target = match (&decision, &rollout) {
        (Some((id, _)), _) => Some(id.to_string()),
        (None, Some(RolloutWrite::Start(r))) => Some(r.id.to_string()),
        (None, Some(RolloutWrite::Step { id, .. } | RolloutWrite::State { id, .. })) => {
            Some(id.to_string())
        }
        (None, None) => None,
    };
    let stored = store.load_catalog().await?;
    if stored.revision != base {
        return Err(ChangeFailure::Stale {
            base,
            current: stored.revision,
        });
    }
    let file = change.apply(&stored)?;
    let description = change.describe(&stored);
    let DryRun { plan, diff } = plan_dry_run(file, &stored, now).map_err(ChangeFailure::Invalid)?;
    if !plan.changed {
        return Err(ChangeFailure::Change(ChangeError::NoChange(description)));
    }
    let sha256 = sha256_hex(change_json.to_string().as_bytes());
    let mut detail = serde_json::json!({
        "description": description, "change": change_json, "moved": moved_json(&diff),
    });
    if let (Some(detail), serde_json::Value::Object(extra)) = (detail.as_object_mut(), extra) {
        detail.extend(extra);
    }
    let audit = NewAuditEntry {
        at: now,
        actor: actor.clone(),
        action,
        target,
        comment: Some(comment).filter(|c| !c.is_empty()),
        revision_before: None,
        revision_after: None,
        detail,
    };
    let record = CatalogRecord {
        at: now,
        sha256,
        file: format!("console: {description} (by {actor})"),
        summary: plan.summary,
        audit: Some(audit),
        decision,
        rollout,
    };
    // The write lands only on the revision the change was planned on (`base`).
    let revision = store.write_catalog(base, plan.write, record).await?;
    let revision_before = base;
    Ok(AppliedChange {
        revision_before,
        revision,
        diff,
        description,
    })
}
