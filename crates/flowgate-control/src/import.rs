//! Catalog import (D13): `flowgate import FILE`.
//!
//! [`import_file`] reads a JSON file (YAML when the name ends in `.yaml` or `.yml`), checks its
//! structure ([`CatalogFile::parse`]), loads the stored catalog, validates the file against it
//! ([`plan_import`]: keys, immutable published versions, and [`flowgate_domain::Catalog::build`]
//! on the catalog the store would hold afterwards) and writes it through the catalog's one
//! write path ([`CatalogWriter`]) at the revision it was planned on; a catalog changed in
//! between is planned again. Any problem
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
    plan_dry_run, plan_import, CatalogDiff, CatalogFile, DryRun, ImportSummary, Problem,
};
use flowgate_domain::people::{AuditAction, NewAuditEntry};
use flowgate_domain::ports::{CatalogRecord, CatalogWriteError, CatalogWriter, StoreError};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

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
    store: &dyn CatalogWriter,
    path: &Path,
    now: OffsetDateTime,
) -> Result<ImportReport, ImportError> {
    import_file_as(store, (CLI_ACTOR, None), path, now).await
}

/// [`import_file`], recorded in the audit log as done by `who.0` with the comment `who.1`.
pub async fn import_file_as(
    store: &dyn CatalogWriter,
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
    store: &dyn CatalogWriter,
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
    store: &dyn CatalogWriter,
    (actor, comment): (&str, Option<&str>),
    path: &Path,
    format: FileFormat,
    text: &str,
    now: OffsetDateTime,
) -> Result<ImportReport, ImportError> {
    let file = parse(path, format, text)?;
    let sha256 = sha256_hex(text.as_bytes());
    let mut attempts = 0;
    loop {
        let stored = store.load_catalog().await?;
        let base = stored.revision;
        let plan = plan_import(file.clone(), &stored, now).map_err(|p| invalid(path, p))?;
        let warnings = labelled(path, plan.warnings);
        if !plan.changed {
            return Ok(ImportReport::new(
                plan.summary,
                false,
                base,
                sha256,
                warnings,
            ));
        }
        let s = &plan.summary;
        let audit = NewAuditEntry {
            at: now,
            actor: actor.to_owned(),
            action: AuditAction::CatalogImport,
            target: Some(path.display().to_string()),
            comment: comment.map(str::to_owned),
            revision_before: None,
            revision_after: None,
            detail: serde_json::json!({
                "sha256": sha256, "workspaces": s.workspaces, "apps": s.apps,
                "flows": s.flows, "versions": s.versions, "placements": s.placements,
                "keys": s.keys,
            }),
        };
        let record = CatalogRecord {
            at: now,
            sha256: sha256.clone(),
            file: path.display().to_string(),
            summary: plan.summary,
            audit: Some(audit),
            decision: None,
            rollout: None,
        };
        match store.write_catalog(base, plan.write, record).await {
            Ok(revision) => {
                return Ok(ImportReport::new(
                    plan.summary,
                    true,
                    revision,
                    sha256,
                    warnings,
                ))
            }
            // Another write landed between the read and this one: plan on the new catalog.
            Err(CatalogWriteError::Stale { .. }) if attempts < STALE_RETRIES => attempts += 1,
            Err(e) => return Err(ImportError::Store(write_error(e))),
        }
    }
}

/// How often an import is planned again when other writes keep landing first.
const STALE_RETRIES: u32 = 8;

/// A catalog write's failure as the store's error (an import records no decision or rollout,
/// so only a stale revision or the store's own failure reach here).
fn write_error(e: CatalogWriteError) -> StoreError {
    match e {
        CatalogWriteError::Store(e) => e,
        other => StoreError::Conflict {
            detail: other.to_string(),
        },
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
    store: &dyn CatalogWriter,
    path: &Path,
    now: OffsetDateTime,
) -> Result<DryRunReport, ImportError> {
    let text = read_text(path).await?;
    dry_run_text(store, path, FileFormat::of(path), &text, now).await
}

/// [`dry_run_file`] for catalog text read elsewhere; `path` only labels the problems.
pub async fn dry_run_text(
    store: &dyn CatalogWriter,
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
/// SHA-256 of `bytes` in lowercase hex: how a catalog file, or a change, is identified in the
/// history (D19).
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// The text of a catalog file.
async fn read_text(path: &Path) -> Result<String, ImportError> {
    let owned = path.to_owned();
    let io = |source| ImportError::Io {
        path: path.to_owned(),
        source,
    };
    let bytes = tokio::fs::read(owned).await.map_err(io)?;
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
    fn sha256_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(sha256_hex(b"").len(), 64);
    }

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
