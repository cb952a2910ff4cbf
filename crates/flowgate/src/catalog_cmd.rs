//! `flowgate catalog history|export` (D19): the applied imports, and the stored catalog as an
//! importable catalog file. Human output goes to stdout, errors to stderr; `--json` prints one
//! JSON document for scripts.

use flowgate_domain::ports::CatalogWriter as _;
use std::path::{Path, PathBuf};

use flowgate_domain::catalog::{CatalogFile, ExportError, ImportSummary};
use flowgate_domain::ids::WorkspaceId;
use flowgate_domain::ports::CatalogSource;
use flowgate_store::{ImportRecord, Store};
use serde_json::json;

use crate::cache::write_atomically;
use crate::cli::{CatalogCommand, ExitCode};
use crate::commands::{print_json, store_failure};
use crate::terminal::{errln, outln};
use flowgate_domain::text::rfc3339;

/// Hex digits of the SHA-256 shown in the history table (the JSON has all 64).
const SHORT_SHA: usize = 12;

/// `flowgate catalog ...`
pub async fn catalog(store: &Store, command: CatalogCommand) -> ExitCode {
    match command {
        CatalogCommand::History { limit, json } => history(store, limit, json).await,
        CatalogCommand::Export { workspace, output } => {
            export(
                store,
                workspace.map(WorkspaceId::from_uuid),
                output.as_deref(),
            )
            .await
        }
    }
}

fn summary_text(s: &ImportSummary) -> String {
    format!(
        "{} workspace(s), {} app(s), {} flow(s), {} version(s), {} placement(s), {} key(s)",
        s.workspaces, s.apps, s.flows, s.versions, s.placements, s.keys
    )
}

fn record_json(r: &ImportRecord) -> serde_json::Value {
    let s = &r.summary;
    json!({
        "revision": r.revision,
        "imported_at": rfc3339(r.imported_at),
        "sha256": r.sha256,
        "file": r.file,
        "summary": {
            "workspaces": s.workspaces, "apps": s.apps, "flows": s.flows,
            "versions": s.versions, "placements": s.placements, "keys": s.keys,
        },
    })
}

/// `flowgate catalog history [--limit N] [--json]`
async fn history(store: &Store, limit: usize, json: bool) -> ExitCode {
    let records = match store.catalog_history(limit).await {
        Ok(records) => records,
        Err(e) => return store_failure("the import history could not be read", &e),
    };
    if json {
        print_json(&json!(records.iter().map(record_json).collect::<Vec<_>>()));
        return ExitCode::Success;
    }
    if records.is_empty() {
        outln!("no catalog imports recorded");
        return ExitCode::Success;
    }
    let times: Vec<String> = records.iter().map(|r| rfc3339(r.imported_at)).collect();
    let time_width = times.iter().map(String::len).max().unwrap_or(0);
    let file_width = records
        .iter()
        .map(|r| r.file.chars().count())
        .max()
        .unwrap_or(0)
        .max("file".len());
    outln!(
        "{:>8}  {:<time_width$}  {:<SHORT_SHA$}  {:<file_width$}  summary",
        "revision",
        "imported at",
        "sha256",
        "file"
    );
    for (r, at) in records.iter().zip(&times) {
        let sha = r.sha256.get(..SHORT_SHA).unwrap_or(&r.sha256);
        outln!(
            "{:>8}  {at:<time_width$}  {sha:<SHORT_SHA$}  {:<file_width$}  {}",
            r.revision,
            r.file,
            summary_text(&r.summary)
        );
    }
    ExitCode::Success
}

/// `flowgate catalog export [--workspace ID] [--output FILE]`
async fn export(store: &Store, workspace: Option<WorkspaceId>, output: Option<&Path>) -> ExitCode {
    let data = match store.load_catalog().await {
        Ok(data) => data,
        Err(e) => return store_failure("the catalog could not be read", &e),
    };
    let file = match CatalogFile::from_data(&data, workspace) {
        Ok(file) => file,
        Err(e @ ExportError::UnknownWorkspace(_)) => {
            errln!("flowgate: {e}");
            return ExitCode::NotFound;
        }
        Err(e) => {
            errln!("flowgate: {e}");
            return ExitCode::Failure;
        }
    };
    let text = match file.to_pretty_json() {
        Ok(text) => text,
        Err(e) => {
            errln!("flowgate: the catalog could not be written as JSON: {e}");
            return ExitCode::Failure;
        }
    };
    let Some(path) = output else {
        // A failed write ends the process (crate::terminal): closed, quietly.
        crate::terminal::json(&text);
        return ExitCode::Success;
    };
    let target: PathBuf = path.to_owned();
    // No secrets inside (D19: no keys), so an ordinary file's mode, less the umask.
    let written =
        tokio::task::spawn_blocking(move || write_atomically(&target, text.as_bytes(), 0o666))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    if let Err(e) = written {
        errln!("flowgate: cannot write {}: {e}", path.display());
        return ExitCode::Failure;
    }
    let apps = file.workspaces.iter().flat_map(|w| &w.apps);
    let flows = apps.clone().flat_map(|a| &a.flows);
    outln!(
        "{}: exported {} workspace(s), {} app(s), {} flow(s), {} version(s), {} placement(s) at revision {}; no API keys",
        path.display(),
        file.workspaces.len(),
        apps.clone().count(),
        flows.clone().count(),
        flows.map(|f| f.versions.len()).sum::<usize>(),
        apps.map(|a| a.placements.len()).sum::<usize>(),
        data.revision
    );
    ExitCode::Success
}
