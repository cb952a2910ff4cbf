//! The catalog import history (D19): `catalog_imports`, one row per applied import.
//!
//! [`Store::update_catalog`] inserts the row in the import's own transaction, after the write,
//! with the revision the write left, so a row exists exactly when its import committed, and an
//! import that wrote nothing (the store already held the file, or the file was rejected) leaves
//! none. The table is not read by the catalog snapshot (no trigger bumps the revision for it)
//! and the events retention (D21) never touches it. [`Store::catalog_history`] reads it, newest
//! first.

use diesel::prelude::*;
use flowgate_domain::catalog::ImportSummary;
use flowgate_domain::ports::StoreError;
use sha2::{Digest, Sha256};
use time::{OffsetDateTime, UtcOffset};

use crate::db::columns;
use crate::error::{corrupt, unstorable};
use crate::schema::catalog_imports;
use crate::store::Store;
use crate::types::DbTimestamp;

/// One applied catalog import, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportRecord {
    /// The catalog revision after the import.
    pub revision: u64,
    /// When the import ran (UTC; microseconds, as stored).
    pub imported_at: OffsetDateTime,
    /// SHA-256 of the file's bytes as read, lowercase hex (64 characters).
    pub sha256: String,
    /// The file as named to the import (the path's display form).
    pub file: String,
    /// What the file held.
    pub summary: ImportSummary,
}

/// SHA-256 of `bytes` in lowercase hex: how a catalog file is identified in the history.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// What an import records once it has written: everything but the revision, which the
/// transaction reads after the write.
#[derive(Clone, Debug)]
pub(crate) struct ImportEntry {
    pub(crate) imported_at: OffsetDateTime,
    pub(crate) sha256: String,
    pub(crate) file: String,
    pub(crate) summary: ImportSummary,
    /// The audit entry of the write (D28), written in the same transaction with the revisions
    /// before and after it filled in.
    pub(crate) audit: Option<flowgate_domain::people::NewAuditEntry>,
    /// The reviewed change this write applies (D28), decided (applied) in the same
    /// transaction; a change decided meanwhile undoes the whole write.
    pub(crate) decision: Option<(
        flowgate_domain::ids::ChangeId,
        flowgate_domain::people::ChangeDecision,
    )>,
    /// The rollout this write starts or steps (D29), recorded in the same transaction; a step
    /// recorded meanwhile (or a rollout no longer in the state it left) undoes the whole
    /// write.
    pub(crate) rollout: Option<RolloutWrite>,
}

/// What a catalog write records of a rollout (D29).
#[derive(Clone, Debug)]
pub enum RolloutWrite {
    /// A new rollout, its first step applied by this write.
    Start(Box<flowgate_domain::rollouts::Rollout>),
    /// A step of a rollout applied by this write (its revision filled in with the write's),
    /// and the rollout's change of state, if any.
    Step {
        /// The rollout.
        id: flowgate_domain::ids::RolloutId,
        /// The step.
        step: flowgate_domain::rollouts::AppliedStep,
        /// From, to, why.
        change: Option<flowgate_domain::ports::StateChange>,
    },
    /// A rollout's change of state made by this write (a rollback: from, to, why).
    State {
        /// The rollout.
        id: flowgate_domain::ids::RolloutId,
        /// From, to, why.
        change: flowgate_domain::ports::StateChange,
    },
}

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

impl ImportEntry {
    /// The row to insert for an import that left the catalog at `revision`.
    pub(crate) fn row(&self, revision: i64) -> Result<ImportRow, StoreError> {
        let s = &self.summary;
        Ok(ImportRow {
            revision,
            imported_at: DbTimestamp(self.imported_at.to_offset(UtcOffset::UTC)),
            sha256: self.sha256.clone(),
            // PostgreSQL's text cannot hold NUL; a `Path` given to `import_text` may, though
            // no file has such a name.
            file: self.file.replace('\0', "\u{FFFD}"),
            workspaces: count(s.workspaces, "workspaces")?,
            apps: count(s.apps, "apps")?,
            flows: count(s.flows, "flows")?,
            versions: count(s.versions, "versions")?,
            placements: count(s.placements, "placements")?,
            keys: count(s.keys, "keys")?,
        })
    }
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
    /// The applied catalog imports, newest first, at most `limit` of them (D19).
    pub async fn catalog_history(&self, limit: usize) -> Result<Vec<ImportRecord>, StoreError> {
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
}
