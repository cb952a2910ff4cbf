//! The catalog import history (D19): `catalog_imports`, one row per applied import.
//!
//! The catalog's writer ([`flowgate_domain::ports::CatalogWriter`]) inserts the row in the import's own transaction, after the write,
//! with the revision the write left, so a row exists exactly when its import committed, and an
//! import that wrote nothing (the store already held the file, or the file was rejected) leaves
//! none. The table is not read by the catalog snapshot (no trigger bumps the revision for it)
//! and the events retention (D21) never touches it. [`flowgate_domain::ports::CatalogWriter::catalog_history`] reads it, newest
//! first.

use diesel::prelude::*;
use flowgate_domain::catalog::ImportSummary;
pub use flowgate_domain::ports::ImportRecord;
use flowgate_domain::ports::{CatalogRecord, StoreError};
use time::UtcOffset;

use crate::db::columns;
use crate::error::{corrupt, unstorable};
use crate::schema::catalog_imports;
use crate::store::Store;
use crate::types::DbTimestamp;

/// A row of `catalog_imports` (its `id` is generated and only orders the rows).
#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = catalog_imports)]
pub(crate) struct ImportRow {
    revision: i64,
    imported_at: DbTimestamp,
    sha256: String,
    file: String,
    workspaces: i64,
    apps: i64,
    flows: i64,
    versions: i64,
    placements: i64,
    keys: i64,
}

fn count(n: usize, what: &str) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| unstorable(format!("{n} {what} cannot be recorded")))
}

/// The row to insert for a write that left the catalog at `revision`.
pub(crate) fn import_row(record: &CatalogRecord, revision: i64) -> Result<ImportRow, StoreError> {
    let s = &record.summary;
    Ok(ImportRow {
        revision,
        imported_at: DbTimestamp(record.at.to_offset(UtcOffset::UTC)),
        sha256: record.sha256.clone(),
        // PostgreSQL's text cannot hold NUL; a `Path` given to `import_text` may, though
        // no file has such a name.
        file: record.file.replace('\0', "\u{FFFD}"),
        workspaces: count(s.workspaces, "workspaces")?,
        apps: count(s.apps, "apps")?,
        flows: count(s.flows, "flows")?,
        versions: count(s.versions, "versions")?,
        placements: count(s.placements, "placements")?,
        keys: count(s.keys, "keys")?,
    })
}

impl ImportRow {
    fn into_record(self) -> Result<ImportRecord, StoreError> {
        let revision = self.revision;
        let decode = |n: i64, what: &str| {
            usize::try_from(n).map_err(|_| {
                corrupt(format!(
                    "the import recorded at revision {revision} has {n} {what}"
                ))
            })
        };
        Ok(ImportRecord {
            revision: u64::try_from(revision)
                .map_err(|_| corrupt(format!("an import is recorded at revision {revision}")))?,
            imported_at: self.imported_at.0,
            sha256: self.sha256,
            file: self.file,
            summary: ImportSummary {
                workspaces: decode(self.workspaces, "workspaces")?,
                apps: decode(self.apps, "apps")?,
                flows: decode(self.flows, "flows")?,
                versions: decode(self.versions, "versions")?,
                placements: decode(self.placements, "placements")?,
                keys: decode(self.keys, "keys")?,
            },
        })
    }
}

impl Store {
    /// The catalog writes, newest first, at most `limit` of them (D19).
    pub(crate) async fn read_history(&self, limit: usize) -> Result<Vec<ImportRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<ImportRow> = self
            .db()
            .rows(
                catalog_imports::table
                    .select(columns::<ImportRow>())
                    .order(catalog_imports::id.desc())
                    .limit(limit),
            )
            .await?;
        rows.into_iter().map(ImportRow::into_record).collect()
    }
}
