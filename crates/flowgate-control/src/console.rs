//! The operator console's use cases (D24, D28, D29, D35), as the console's pages call them:
//! the stored catalog and its history, a file's dry run, keys, people (added, linked and
//! changed as `flowgate users` does), catalog changes through the one write path, and staged
//! rollouts through the same engine as `flowgate rollouts`. The pages (`flowgate-http`'s
//! console) render what these return; a failure the caller made is a [`ChangeRefusal`] with a
//! stable code, a store's failure is logged here and marked `unavailable`.

use std::path::Path;
use std::sync::Arc;

use flowgate_domain::catalog::{CatalogChange, CatalogData, CatalogDiff, ImportSummary};
use flowgate_domain::ids::{AppId, ChangeId, FlowId, KeyId, RolloutId, WorkspaceId};
use flowgate_domain::keys::{KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::people::{ChangeDecision, ChangeRecord, Person, PersonUpdate, Role};
use flowgate_domain::ports::{ImportRecord, KeyStore, StoreError};
use flowgate_domain::rollouts::{Rollout, RolloutPlan};
use time::OffsetDateTime;

use crate::changes::{apply_change, preview_change, ChangeFailure};
use crate::import::{dry_run_text, DryRunReport, FileFormat, ImportError};
use crate::keys::CreatedKey;
use crate::people::{Linked, PeopleFailure};
use crate::review::decide::DecideFailure;
use crate::rollouts::{RolloutFailure, StartRequest};
use crate::ControlStore;

/// The ports the console's use cases need: the control plane's and the keys.
pub trait ConsoleStore: ControlStore + KeyStore {}

impl<T: ControlStore + KeyStore + ?Sized> ConsoleStore for T {}

/// What importing a file would do (D19), written nowhere.
#[derive(Clone, Debug, PartialEq)]
pub struct Preview {
    /// The stored revision (unchanged).
    pub revision: u64,
    /// Whether the import would change anything.
    pub changed: bool,
    /// What the file holds.
    pub summary: ImportSummary,
    /// The import's warnings.
    pub warnings: Vec<String>,
    /// Entities, rule lists and experiment assignments that would change.
    pub diff: CatalogDiff,
}

/// Why a preview has no result.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// The file is refused: each problem, with its place in the file.
    #[error("the file is refused: {}", .0.join("; "))]
    Invalid(Vec<String>),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a catalog change (D28) would do, or did: the revision it is (was) made on, the D19 diff
/// (users moved per experiment), its description.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeOutcome {
    /// The revision the change is made on.
    pub revision_before: u64,
    /// The revision after it (the same as before for a preview).
    pub revision: u64,
    /// What changes.
    pub diff: CatalogDiff,
    /// One line for people.
    pub description: String,
}

/// A rollout to start (D29), as the console's form gives it.
#[derive(Clone, Debug)]
pub struct RolloutStart {
    /// The app.
    pub app: AppId,
    /// The placement's key: its first rule serving a flow (and on) is rolled.
    pub placement: String,
    /// The new flow.
    pub flow: FlowId,
    /// The version of `flow` to roll out; `None`: the one it publishes.
    pub version: Option<u32>,
    /// The plan.
    pub plan: RolloutPlan,
}

/// Why a change was not previewed or applied, or a rollout (D29) not started or moved; nothing
/// was written.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeRefusal {
    /// A stable code (`stale_base`, `unknown_variant`, `no_change`, `already_decided`, ...; for
    /// a rollout also `not_found`, `wrong_state`, `invalid`, `rollout_moved`).
    pub code: String,
    /// What is wrong, in a sentence quoting the value at fault.
    pub message: String,
    /// Whether the store failed (503) rather than the change (409 or 400).
    pub unavailable: bool,
}

/// What a person does to a rollout (D29).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RolloutMove {
    /// A running rollout takes no step until resumed.
    Pause,
    /// A paused rollout goes on.
    Resume,
    /// A running or paused rollout ends now: the rule serves the old flow to everyone.
    RollBack,
}

impl RolloutMove {
    /// The move a console path names: `pause`, `resume` or `rollback`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "pause" => Some(Self::Pause),
            "resume" => Some(Self::Resume),
            "rollback" => Some(Self::RollBack),
            _ => None,
        }
    }
}

/// The console's use cases over one store (cheap to clone: the store is shared).
#[derive(Clone)]
pub struct Console {
    store: Arc<dyn ConsoleStore>,
}

impl Console {
    /// The console's use cases over `store`.
    pub fn new(store: Arc<dyn ConsoleStore>) -> Self {
        Self { store }
    }

    /// The catalog as stored.
    pub async fn catalog(&self) -> Result<CatalogData, StoreError> {
        self.store.load_catalog().await
    }

    /// The catalog writes, newest first, at most `limit`.
    pub async fn import_history(&self, limit: usize) -> Result<Vec<ImportRecord>, StoreError> {
        self.store.catalog_history(limit).await
    }

    /// What importing `text` (a catalog file named `file_name`: `.yaml`/`.yml` is YAML,
    /// anything else JSON) would change, writing nothing.
    pub async fn preview(&self, file_name: &str, text: &str) -> Result<Preview, PreviewError> {
        let path = Path::new(file_name);
        let now = OffsetDateTime::now_utc();
        let store = self.store.as_ref();
        match dry_run_text(store, path, FileFormat::of(path), text, now).await {
            Ok(DryRunReport { report, diff }) => Ok(Preview {
                revision: report.revision,
                changed: report.changed,
                summary: ImportSummary {
                    workspaces: report.workspaces,
                    apps: report.apps,
                    flows: report.flows,
                    versions: report.versions,
                    placements: report.placements,
                    keys: report.keys,
                },
                warnings: report.warnings.iter().map(ToString::to_string).collect(),
                diff,
            }),
            Err(ImportError::Invalid(problems)) => Err(PreviewError::Invalid(
                problems.iter().map(ToString::to_string).collect(),
            )),
            Err(ImportError::Store(e)) => Err(PreviewError::Store(e)),
            Err(other) => Err(PreviewError::Invalid(vec![other.to_string()])),
        }
    }

    /// A workspace's keys, revoked ones included, oldest first.
    pub async fn list_keys(&self, workspace: WorkspaceId) -> Result<Vec<KeyRecord>, StoreError> {
        self.store.list_keys(workspace).await
    }

    /// Creates a key ([`crate::keys::create`]).
    pub async fn create_key(
        &self,
        workspace: WorkspaceId,
        environment: KeyEnvironment,
        key_type: KeyType,
        name: String,
    ) -> Result<CreatedKey, StoreError> {
        let now = OffsetDateTime::now_utc();
        let store = self.store.as_ref();
        crate::keys::create(store, workspace, environment, key_type, name, now).await
    }

    /// Revokes a key (revoking twice keeps the first time).
    pub async fn revoke_key(&self, id: KeyId) -> Result<KeyRecord, StoreError> {
        self.store.revoke_key(id, OffsetDateTime::now_utc()).await
    }

    /// What `change` would do to the stored catalog (D28), writing nothing.
    pub async fn preview_change(
        &self,
        change: CatalogChange,
    ) -> Result<ChangeOutcome, ChangeRefusal> {
        let store = self.store.as_ref();
        let previewed = preview_change(store, &change, OffsetDateTime::now_utc())
            .await
            .map_err(refusal)?;
        Ok(ChangeOutcome {
            revision_before: previewed.revision,
            revision: previewed.revision,
            diff: previewed.diff,
            description: previewed.description,
        })
    }

    /// Applies `change` made on revision `base` through the catalog's one write path, with its
    /// audit entry (`actor`, `comment`) and the reviewed change's `decision`, in one write; a
    /// catalog changed since `base` refuses it (`stale_base`). An approved rollout start (D35)
    /// starts the rollout with its record.
    pub async fn apply_change(
        &self,
        change: CatalogChange,
        base: u64,
        actor: String,
        comment: String,
        decision: Option<(ChangeId, ChangeDecision)>,
    ) -> Result<ChangeOutcome, ChangeRefusal> {
        let now = OffsetDateTime::now_utc();
        let store = self.store.as_ref();
        let applied = match (&change, decision) {
            (CatalogChange::StartRollout { plan: Some(_), .. }, Some(decision)) => {
                crate::review::rollout::start_reviewed(
                    store, &change, base, &actor, &comment, decision, now,
                )
                .await
                .map_err(rollout_refusal)?
            }
            (_, decision) => apply_change(store, &change, base, &actor, &comment, decision, now)
                .await
                .map_err(refusal)?,
        };
        Ok(ChangeOutcome {
            revision_before: applied.revision_before,
            revision: applied.revision,
            diff: applied.diff,
            description: applied.description,
        })
    }

    /// Every staged rollout (D29), newest first.
    pub async fn list_rollouts(&self) -> Result<Vec<Rollout>, StoreError> {
        self.store.list_rollouts(None).await
    }

    /// The rollout with this id, with its applied steps, if any.
    pub async fn rollout(&self, id: RolloutId) -> Result<Option<Rollout>, StoreError> {
        self.store.rollout(id).await
    }

    /// Starts a rollout as `flowgate rollouts start` does: its first step is applied now,
    /// recorded in the audit log as `actor`'s with `comment`.
    pub async fn start_rollout(
        &self,
        start: RolloutStart,
        actor: String,
        comment: String,
    ) -> Result<Rollout, ChangeRefusal> {
        let request = request_of(start, actor, comment);
        let now = OffsetDateTime::now_utc();
        crate::rollouts::start(self.store.as_ref(), request, now)
            .await
            .map_err(rollout_refusal)
    }

    /// Proposes that rollout for review instead (D35, `catalog.require_review`): a pending
    /// change by `actor`, which another editor or admin applies by approving it; its id.
    pub async fn propose_rollout(
        &self,
        start: RolloutStart,
        actor: String,
        comment: String,
    ) -> Result<ChangeId, ChangeRefusal> {
        let request = request_of(start, actor, comment);
        let now = OffsetDateTime::now_utc();
        crate::review::rollout::propose_start(self.store.as_ref(), request, now)
            .await
            .map(|record| record.id)
            .map_err(rollout_refusal)
    }

    /// Pauses, resumes or rolls back a rollout, as `actor` with `comment` (`wrong_state` when
    /// its state does not allow the move).
    pub async fn move_rollout(
        &self,
        id: RolloutId,
        how: RolloutMove,
        actor: String,
        comment: String,
    ) -> Result<Rollout, ChangeRefusal> {
        let now = OffsetDateTime::now_utc();
        let store = self.store.as_ref();
        let moved = match how {
            RolloutMove::Pause => crate::rollouts::pause(store, id, &actor, &comment, now).await,
            RolloutMove::Resume => crate::rollouts::resume(store, id, &actor, &comment, now).await,
            // A person's rollback records no guardrail reading, as `flowgate rollouts rollback`.
            RolloutMove::RollBack => {
                let figures = serde_json::Value::Null;
                crate::rollouts::roll_back(store, id, &actor, &comment, figures, now).await
            }
        };
        moved.map_err(rollout_refusal)
    }

    /// Rejects pending change `id` as `actor` with `comment` (D35).
    pub async fn reject_change(
        &self,
        id: ChangeId,
        actor: &str,
        comment: &str,
    ) -> Result<ChangeRecord, DecideFailure> {
        let now = OffsetDateTime::now_utc();
        crate::review::decide::reject(self.store.as_ref(), id, actor, comment, now).await
    }

    /// Withdraws pending change `id`, as its author `actor`.
    pub async fn withdraw_change(
        &self,
        id: ChangeId,
        actor: &str,
    ) -> Result<ChangeRecord, DecideFailure> {
        let now = OffsetDateTime::now_utc();
        let how = crate::review::decide::Withdrawal::ByAuthor;
        crate::review::decide::withdraw(self.store.as_ref(), id, actor, how, now).await
    }

    /// Adds the person `email` with `role` and makes their first sign-in link (D28), audited
    /// as `actor`'s, as `flowgate users add` does.
    pub async fn add_person(
        &self,
        email: &str,
        role: Role,
        actor: &str,
    ) -> Result<Linked, PeopleFailure> {
        let now = OffsetDateTime::now_utc();
        crate::people::add(self.store.as_ref(), (email, role), actor, now).await
    }

    /// A new sign-in link for the person `email`, audited as `actor`'s.
    pub async fn person_link(&self, email: &str, actor: &str) -> Result<Linked, PeopleFailure> {
        crate::people::link(self.store.as_ref(), email, actor, OffsetDateTime::now_utc()).await
    }

    /// Changes the person `email` (a role, disabled or not), audited as `actor`'s; the person
    /// after, and the audit entry's failure if any.
    pub async fn change_person(
        &self,
        email: &str,
        change: PersonUpdate,
        actor: &str,
    ) -> Result<(Person, Option<StoreError>), PeopleFailure> {
        let now = OffsetDateTime::now_utc();
        crate::people::update(self.store.as_ref(), email, change, actor, now).await
    }
}

/// The console's rollout start as the rollouts' request, by `actor` with `comment`.
fn request_of(start: RolloutStart, actor: String, comment: String) -> StartRequest {
    StartRequest {
        app: start.app,
        placement: start.placement,
        flow: start.flow,
        version: start.version,
        plan: start.plan,
        actor,
        comment,
    }
}

/// A rollout's failure as the console shows it: the store's failures are unavailable (503)
/// and logged; the rest are the caller's (a wrong state, an invalid start).
fn rollout_refusal(failure: RolloutFailure) -> ChangeRefusal {
    let unavailable = !failure.is_callers();
    if unavailable {
        tracing::error!(error = %failure, "console: a rollout could not be read or written");
    }
    ChangeRefusal {
        code: failure.code().to_owned(),
        message: failure.to_string(),
        unavailable,
    }
}

/// A change's failure as the console shows it.
fn refusal(failure: ChangeFailure) -> ChangeRefusal {
    if let ChangeFailure::Store(e) = &failure {
        tracing::error!(error = %e, "console: a catalog change could not be read or written");
    }
    ChangeRefusal {
        code: failure.code().to_owned(),
        message: failure.to_string(),
        unavailable: matches!(failure, ChangeFailure::Store(_)),
    }
}
