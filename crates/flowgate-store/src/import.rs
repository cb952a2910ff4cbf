//! Catalog import (D13): `flowgate import FILE`.
//!
//! [`import_file`] reads a JSON file (YAML when the name ends in `.yaml` or `.yml`), checks its
//! structure ([`CatalogFile::parse`]), then, in ONE transaction holding the catalog write lock,
//! loads the stored catalog, validates the file against it ([`plan_import`]: keys, immutable
//! published versions, and [`flowgate_domain::Catalog::build`] on the catalog the store would
//! hold afterwards) and applies it with [`Store::replace_catalog`]'s upsert. Any problem
//! rejects the whole file: every problem is returned with the file path and a JSON pointer,
//! and nothing is written. A file the store already holds writes nothing, so the revision
//! stays and no server reloads (D12). An import that writes is recorded in the import history
//! (D19: revision, time, the file's SHA-256 and name, the summary) in the same transaction.
//!
//! YAML is converted to JSON text first (key order kept), so both formats take the same path
//! and the pointers of YAML problems name the same nodes.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

use flowgate_domain::catalog::{
    plan_dry_run, plan_import, CatalogChange, CatalogDiff, CatalogFile, ChangeError, DryRun,
    ImportSummary, Problem,
};
use flowgate_domain::ids::ChangeId;
use flowgate_domain::people::{AuditAction, ChangeDecision, NewAuditEntry};
use flowgate_domain::ports::{CatalogSource, StoreError};
use time::OffsetDateTime;

pub use crate::history::RolloutWrite;
use crate::history::{sha256_hex, ImportEntry};
use crate::store::Store;

/// How a catalog file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// JSON (the default).
    Json,
    /// YAML, converted to JSON before anything else.
    Yaml,
}

impl FileFormat {
    /// YAML for `.yaml` and `.yml` (any case), JSON otherwise (D13).
    pub fn of(path: &Path) -> FileFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml") => {
                FileFormat::Yaml
            }
            _ => FileFormat::Json,
        }
    }
}

/// One problem (or warning) in a catalog file: where and what. Displays as
/// `path#/json/pointer: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileProblem {
    /// The file.
    pub path: PathBuf,
    /// RFC 6901 JSON pointer of the offending value (empty for the whole file).
    pub pointer: String,
    /// What is wrong, in a sentence.
    pub message: String,
}

impl FileProblem {
    fn new(path: &Path, problem: Problem) -> Self {
        FileProblem {
            path: path.to_owned(),
            pointer: problem.pointer,
            message: problem.message,
        }
    }
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}#{}: {}",
            self.path.display(),
            self.pointer,
            self.message
        )
    }
}

/// What an import did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportReport {
    /// Workspaces in the file.
    pub workspaces: usize,
    /// Apps in the file.
    pub apps: usize,
    /// Flows in the file.
    pub flows: usize,
    /// Flow versions in the file.
    pub versions: usize,
    /// Placements in the file.
    pub placements: usize,
    /// API keys in the file.
    pub keys: usize,
    /// False when the store already held everything in the file (nothing was written).
    pub changed: bool,
    /// The catalog revision after the import.
    pub revision: u64,
    /// SHA-256 of the file's bytes as read, lowercase hex: how the history names it (D19).
    pub sha256: String,
    /// Allowed but noteworthy changes (D5: a running experiment's weights or variant order).
    pub warnings: Vec<FileProblem>,
}

impl ImportReport {
    fn new(
        summary: ImportSummary,
        changed: bool,
        revision: u64,
        sha256: String,
        warnings: Vec<FileProblem>,
    ) -> Self {
        ImportReport {
            workspaces: summary.workspaces,
            apps: summary.apps,
            flows: summary.flows,
            versions: summary.versions,
            placements: summary.placements,
            keys: summary.keys,
            changed,
            revision,
            sha256,
            warnings,
        }
    }
}

/// Why an import wrote nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The file is invalid: every problem found, in document order.
    #[error("invalid catalog file, {} problem(s):\n{}", .0.len(), list(.0))]
    Invalid(Vec<FileProblem>),
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The store failed (the transaction rolled back).
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn list(problems: &[FileProblem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn invalid(path: &Path, problems: Vec<Problem>) -> ImportError {
    ImportError::Invalid(
        problems
            .into_iter()
            .map(|p| FileProblem::new(path, p))
            .collect(),
    )
}

/// The catalog in `text` (YAML converted to JSON first), or every problem it has.
fn parse(path: &Path, format: FileFormat, text: &str) -> Result<CatalogFile, ImportError> {
    let json = match format {
        FileFormat::Json => Cow::Borrowed(text),
        FileFormat::Yaml => Cow::Owned(yaml_to_json(text).map_err(|p| invalid(path, vec![p]))?),
    };
    CatalogFile::parse(&json).map_err(|problems| invalid(path, problems))
}

/// The warnings of a plan, labelled with the file.
fn labelled(path: &Path, warnings: Vec<Problem>) -> Vec<FileProblem> {
    warnings
        .into_iter()
        .map(|w| FileProblem::new(path, w))
        .collect()
}

/// The catalog file at `path` read and parsed as [`import_file`] reads it (JSON, or YAML by
/// its name), with the SHA-256 of its bytes (hex): what a proposed import (D35) keeps.
pub async fn read_catalog_file(path: &Path) -> Result<(CatalogFile, String), ImportError> {
    let text = read_text(path).await?;
    let file = parse(path, FileFormat::of(path), &text)?;
    Ok((file, sha256_hex(text.as_bytes())))
}

/// Imports the catalog file at `path` (D13); `now` is the creation time of new keys.
pub async fn import_file(
    store: &Store,
    path: &Path,
    now: OffsetDateTime,
) -> Result<ImportReport, ImportError> {
    import_file_as(store, (CLI_ACTOR, None), path, now).await
}

/// [`import_file`], recorded in the audit log as done by `who.0` with the comment `who.1`.
pub async fn import_file_as(
    store: &Store,
    who: (&str, Option<&str>),
    path: &Path,
    now: OffsetDateTime,
) -> Result<ImportReport, ImportError> {
    let text = read_text(path).await?;
    import_text_as(store, who, path, FileFormat::of(path), &text, now).await
}

/// Imports catalog text read elsewhere; `path` labels the problems and names the file in the
/// import history (D19), which records an import that changed the store with the SHA-256 of
/// `text`'s bytes and `now` as its time. The audit log (D28) records it as done by `cli`.
pub async fn import_text(
    store: &Store,
    path: &Path,
    format: FileFormat,
    text: &str,
    now: OffsetDateTime,
) -> Result<ImportReport, ImportError> {
    import_text_as(store, (CLI_ACTOR, None), path, format, text, now).await
}

/// Who the audit log names for the command line (D28).
pub const CLI_ACTOR: &str = "cli";

/// [`import_text`], recorded in the audit log as done by `actor`, with `comment` (a
/// break-glass import under review says so, D35).
pub async fn import_text_as(
    store: &Store,
    (actor, comment): (&str, Option<&str>),
    path: &Path,
    format: FileFormat,
    text: &str,
    now: OffsetDateTime,
) -> Result<ImportReport, ImportError> {
    let file = parse(path, format, text)?;
    let sha256 = sha256_hex(text.as_bytes());
    let (recorded_sha256, file_name) = (sha256.clone(), path.display().to_string());
    let actor = actor.to_owned();
    let comment = comment.map(str::to_owned);
    let outcome = store
        .update_catalog(move |stored| {
            let plan = plan_import(file, &stored, now)?;
            let s = &plan.summary;
            let audit = NewAuditEntry {
                at: now,
                actor,
                action: AuditAction::CatalogImport,
                target: Some(file_name.clone()),
                comment: comment.clone(),
                revision_before: None,
                revision_after: None,
                detail: serde_json::json!({
                    "sha256": recorded_sha256, "workspaces": s.workspaces, "apps": s.apps,
                    "flows": s.flows, "versions": s.versions, "placements": s.placements,
                    "keys": s.keys,
                }),
            };
            let entry = ImportEntry {
                imported_at: now,
                sha256: recorded_sha256,
                file: file_name,
                summary: plan.summary,
                audit: Some(audit),
                decision: None,
                rollout: None,
            };
            let write = plan.changed.then_some((plan.write, entry));
            Ok((write, (plan.summary, plan.changed, plan.warnings)))
        })
        .await?;
    match outcome {
        Err(problems) => Err(invalid(path, problems)),
        Ok(((summary, changed, warnings), revision)) => Ok(ImportReport::new(
            summary,
            changed,
            revision,
            sha256,
            labelled(path, warnings),
        )),
    }
}

/// What an import would do (D19): its report as if applied (`revision` is the stored one,
/// which the dry run leaves alone) and what would change.
#[derive(Clone, Debug, PartialEq)]
pub struct DryRunReport {
    /// The counts, whether anything would be written, and the warnings.
    pub report: ImportReport,
    /// Entities, rule lists and experiment assignments that would change.
    pub diff: CatalogDiff,
}

/// Validates the catalog file at `path` as [`import_file`] does and says what it would change,
/// writing nothing (D19).
pub async fn dry_run_file(
    store: &Store,
    path: &Path,
    now: OffsetDateTime,
) -> Result<DryRunReport, ImportError> {
    let text = read_text(path).await?;
    dry_run_text(store, path, FileFormat::of(path), &text, now).await
}

/// [`dry_run_file`] for catalog text read elsewhere; `path` only labels the problems.
pub async fn dry_run_text(
    store: &Store,
    path: &Path,
    format: FileFormat,
    text: &str,
    now: OffsetDateTime,
) -> Result<DryRunReport, ImportError> {
    let file = parse(path, format, text)?;
    let stored = store.load_catalog().await?;
    let revision = stored.revision;
    let DryRun { plan, diff } =
        plan_dry_run(file, &stored, now).map_err(|problems| invalid(path, problems))?;
    let warnings = labelled(path, plan.warnings);
    Ok(DryRunReport {
        report: ImportReport::new(
            plan.summary,
            plan.changed,
            revision,
            sha256_hex(text.as_bytes()),
            warnings,
        ),
        diff,
    })
}

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
        match e {
            StoreError::Conflict { ref detail } if detail.contains("decided meanwhile") => {
                Self::Decided
            }
            StoreError::Conflict { ref detail } if detail.contains(" rollout ") => {
                Self::RolloutMoved(detail.clone())
            }
            other => Self::Store(other),
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
    store: &Store,
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
    store: &Store,
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
    store: &Store,
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
    let outcome = store
        .update_catalog(move |stored| {
            if stored.revision != base {
                return Err(ChangeFailure::Stale {
                    base,
                    current: stored.revision,
                });
            }
            let file = change.apply(&stored)?;
            let description = change.describe(&stored);
            let DryRun { plan, diff } =
                plan_dry_run(file, &stored, now).map_err(ChangeFailure::Invalid)?;
            if !plan.changed {
                return Err(ChangeFailure::Change(ChangeError::NoChange(description)));
            }
            let sha256 = sha256_hex(change_json.to_string().as_bytes());
            let mut detail = serde_json::json!({
                "description": description, "change": change_json, "moved": moved_json(&diff),
            });
            if let (Some(detail), serde_json::Value::Object(extra)) =
                (detail.as_object_mut(), extra)
            {
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
            let entry = ImportEntry {
                imported_at: now,
                sha256,
                file: format!("console: {description} (by {actor})"),
                summary: plan.summary,
                audit: Some(audit),
                decision,
                rollout,
            };
            Ok((
                Some((plan.write, entry)),
                (diff, description, stored.revision),
            ))
        })
        .await?;
    let ((diff, description, revision_before), revision) = outcome?;
    Ok(AppliedChange {
        revision_before,
        revision,
        diff,
        description,
    })
}

/// The text of a catalog file.
async fn read_text(path: &Path) -> Result<String, ImportError> {
    let owned = path.to_owned();
    let io = |source| ImportError::Io {
        path: path.to_owned(),
        source,
    };
    let bytes = tokio::task::spawn_blocking(move || std::fs::read(owned))
        .await
        .map_err(|e| io(std::io::Error::other(e)))?
        .map_err(io)?;
    String::from_utf8(bytes).map_err(|_| {
        invalid(
            path,
            vec![Problem {
                pointer: String::new(),
                message: "the file is not UTF-8 text".to_owned(),
            }],
        )
    })
}

/// YAML text to JSON text, mapping order kept (serde_norway's mappings are ordered), so a
/// `flow_schema` written in YAML is stored with its keys in the order written.
fn yaml_to_json(text: &str) -> Result<String, Problem> {
    let value: serde_norway::Value = serde_norway::from_str(text).map_err(|e| Problem {
        pointer: String::new(),
        message: format!("not valid YAML: {e}"),
    })?;
    serde_json::to_string(&value).map_err(|e| Problem {
        pointer: String::new(),
        message: format!("the YAML has no JSON equivalent: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_follows_the_extension() {
        assert_eq!(
            FileFormat::of(Path::new("a/catalog.json")),
            FileFormat::Json
        );
        assert_eq!(FileFormat::of(Path::new("catalog")), FileFormat::Json);
        assert_eq!(FileFormat::of(Path::new("catalog.YML")), FileFormat::Yaml);
        assert_eq!(FileFormat::of(Path::new("catalog.yaml")), FileFormat::Yaml);
    }

    #[test]
    fn yaml_becomes_json_in_written_order() {
        let json = yaml_to_json("b: 1\na:\n  - x\n  - 2.5\nc: null\n").expect("converts");
        assert_eq!(json, r#"{"b":1,"a":["x",2.5],"c":null}"#);
        let problem = yaml_to_json("a: [").expect_err("invalid");
        assert!(problem.message.starts_with("not valid YAML"), "{problem:?}");
    }

    #[test]
    fn problems_display_with_path_and_pointer() {
        let p = FileProblem {
            path: PathBuf::from("catalog.json"),
            pointer: "/workspaces/0/name".to_owned(),
            message: "must be a string".to_owned(),
        };
        assert_eq!(
            p.to_string(),
            "catalog.json#/workspaces/0/name: must be a string"
        );
    }
}
