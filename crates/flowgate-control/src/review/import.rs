//! `flowgate import` under review (D35): with `catalog.require_review`, an import moves users
//! like any change. `--author EMAIL` proposes it (an `import_file` change holding the file,
//! applied when another editor or admin approves it in the console); `--apply-now` imports at
//! once as break-glass, its audit entry saying so. The command prints (`commands::import`).

use std::path::Path;

use crate::changes::preview_change;
use crate::import::{import_file_as, read_catalog_file, ImportError, ImportReport, CLI_ACTOR};
use crate::ControlStore;
use flowgate_domain::catalog::CatalogChange;
use flowgate_domain::people::ChangeRecord;
use flowgate_domain::ports::StoreError;
use time::OffsetDateTime;

use crate::review::Proposal;

/// Why an import was not proposed; nothing was written.
#[derive(Debug)]
pub enum ProposeFailure {
    /// `--author` names nobody who may propose changes.
    NotAnEditor,
    /// The file does not read.
    File(ImportError),
    /// The file does not import on the catalog as it is (why).
    Invalid(String),
    /// The store failed.
    Store(StoreError),
}

/// Imports `file` at once as `cli`, its audit entry carrying `comment` (break-glass).
pub async fn import_now(
    store: &dyn ControlStore,
    file: &Path,
    comment: &str,
) -> Result<ImportReport, ImportError> {
    import_file_as(
        store,
        (CLI_ACTOR, Some(comment)),
        file,
        OffsetDateTime::now_utc(),
    )
    .await
}

/// Proposes importing `file` as `email`'s (an editor or admin): checked against the catalog
/// as it is (a file that does not import is refused now, not at approval), stored pending.
pub async fn propose(
    store: &dyn ControlStore,
    file: &Path,
    email: &str,
) -> Result<ChangeRecord, ProposeFailure> {
    let author = crate::review::author(store, email)
        .await
        .map_err(ProposeFailure::Store)?
        .ok_or(ProposeFailure::NotAnEditor)?;
    let (catalog, sha256) = read_catalog_file(file)
        .await
        .map_err(ProposeFailure::File)?;
    let catalog = serde_json::to_value(&catalog)
        .map_err(|e| ProposeFailure::Invalid(format!("the file could not be kept as JSON: {e}")))?;
    let change = CatalogChange::ImportFile {
        name: file.display().to_string(),
        sha256,
        catalog: Box::new(catalog),
    };
    let now = OffsetDateTime::now_utc();
    let preview = preview_change(store, &change, now)
        .await
        .map_err(|e| ProposeFailure::Invalid(e.to_string()))?;
    let proposal = Proposal {
        change: &change,
        base: preview.revision,
        summary: preview.description,
        author: &author,
        comment: "proposed with flowgate import",
    };
    crate::review::record(store, proposal, now)
        .await
        .map_err(ProposeFailure::Store)
}
