//! The local catalog cache (D20): the source of the last catalog that built, kept in a file so
//! that a restart during a database outage still serves resolve.
//!
//! The file is JSON: a format number, the database it was read from ([`Store::identity`]: host,
//! port and database name, never credentials), when it was written, and the [`CatalogData`]
//! (key digests, never plaintext keys). It is written atomically (a temporary file beside it,
//! fsync, rename, fsync of the folder) with mode 0600, so a crash mid-write leaves the previous
//! file, and a reader never sees half of one. A file for another database, of another format
//! or that does not parse is refused with a message saying which.
//!
//! [`Store::identity`]: flowgate_store::Store::identity

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use flowgate_domain::CatalogData;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The file format this build writes and reads.
const FORMAT: u32 = 1;

/// Where the cache lives and which database it belongs to.
#[derive(Clone, Debug)]
pub struct CatalogCache {
    path: PathBuf,
    database: String,
}

/// A catalog read back from the cache.
#[derive(Debug)]
pub struct Cached {
    /// The catalog's source.
    pub data: CatalogData,
    /// When it was written (RFC 3339, UTC).
    pub written_at: String,
}

/// Why a cache file was not used.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Reading it failed.
    #[error("cannot read the catalog cache {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        error: io::Error,
    },
    /// It is not a cache file this build can read.
    #[error("the catalog cache {path} cannot be used: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// It was written for another database.
    #[error(
        "the catalog cache {path} holds the catalog of `{found}`, not of `{expected}` \
         (database.url): not used"
    )]
    OtherDatabase {
        /// The file.
        path: String,
        /// The database it records.
        found: String,
        /// The configured database.
        expected: String,
    },
}

#[derive(Serialize)]
struct Envelope<'a> {
    format: u32,
    database: &'a str,
    written_at: String,
    catalog: &'a CatalogData,
}

#[derive(Deserialize)]
struct Header {
    format: u32,
    database: String,
}

#[derive(Deserialize)]
struct Stored {
    database: String,
    written_at: String,
    catalog: CatalogData,
}

impl CatalogCache {
    /// A cache at `path` for the database `database` ([`flowgate_store::Store::identity`]).
    pub fn new(path: impl Into<PathBuf>, database: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            database: database.into(),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes for `data`, written now (serialised where the catalog is built, so
    /// the write itself is only I/O).
    pub fn encode(&self, data: &CatalogData) -> Result<Vec<u8>, serde_json::Error> {
        let written_at = OffsetDateTime::now_utc()
            .format(&Rfc3339)
            .unwrap_or_default();
        serde_json::to_vec(&Envelope {
            format: FORMAT,
            database: &self.database,
            written_at,
            catalog: data,
        })
    }

    /// Replaces the file with `bytes` ([`CatalogCache::encode`]) atomically, mode 0600 (it
    /// holds key digests); blocking.
    pub fn write(&self, bytes: &[u8]) -> io::Result<()> {
        write_atomically(&self.path, bytes, 0o600)
    }

    /// The cached catalog: `Ok(None)` when there is no file; an error when it cannot be used
    /// (unreadable, another format, another database). Blocking.
    pub fn load(&self) -> Result<Option<Cached>, CacheError> {
        let path = self.path.display().to_string();
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(CacheError::Read { path, error }),
        };
        let unreadable = |reason: String| CacheError::Unreadable {
            path: path.clone(),
            reason,
        };
        // The header first: a file of another format or database is refused without
        // decoding a catalog it does not describe.
        let header: Header = serde_json::from_slice(&bytes)
            .map_err(|e| unreadable(format!("not a catalog cache file ({e})")))?;
        if header.format != FORMAT {
            return Err(unreadable(format!(
                "format {} (this build reads format {FORMAT})",
                header.format
            )));
        }
        if header.database != self.database {
            return Err(CacheError::OtherDatabase {
                path,
                found: header.database,
                expected: self.database.clone(),
            });
        }
        let stored: Stored = serde_json::from_slice(&bytes)
            .map_err(|e| unreadable(format!("the catalog does not decode ({e})")))?;
        debug_assert_eq!(stored.database, self.database);
        Ok(Some(Cached {
            data: stored.catalog,
            written_at: stored.written_at,
        }))
    }
}

/// Replaces the file at `path` with `bytes` so that a reader sees the old file or the new one,
/// never a part, even across a crash: a temporary file beside it (created with `mode`, less
/// the umask), fsync, rename over `path`, fsync of the folder. Creates the folder when missing.
/// Blocking.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "flowgate.json".to_owned());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename itself is durable once the folder is.
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn data(revision: u64) -> CatalogData {
        CatalogData {
            revision,
            ..CatalogData::default()
        }
    }

    fn write(cache: &CatalogCache, data: &CatalogData) {
        cache.write(&cache.encode(data).unwrap()).unwrap();
    }

    #[test]
    fn a_written_catalog_reads_back_for_its_database_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/catalog-cache.json");
        let cache = CatalogCache::new(&path, "postgres://db:5432/fg");
        assert!(cache.load().unwrap().is_none(), "no file: nothing cached");
        write(&cache, &data(7));
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "it holds key digests");
        let cached = cache.load().unwrap().unwrap();
        assert_eq!(cached.data.revision, 7);
        assert!(cached.written_at.starts_with("20"), "{}", cached.written_at);
        // Written again: replaced, and no temporary file is left behind.
        write(&cache, &data(8));
        assert_eq!(cache.load().unwrap().unwrap().data.revision, 8);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["catalog-cache.json"]);

        let other = CatalogCache::new(&path, "postgres://other:5432/fg");
        let err = other.load().unwrap_err().to_string();
        assert!(
            err.contains("`postgres://db:5432/fg`")
                && err.contains("not of `postgres://other:5432/fg`"),
            "{err}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_cache_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog-cache.json");
        let cache = CatalogCache::new(&path, "postgres://db:5432/fg");
        fs::write(&path, b"{\"truncated\": ").unwrap();
        let err = cache.load().unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string()) && err.contains("not a catalog cache"),
            "{err}"
        );
        fs::write(
            &path,
            br#"{"format": 2, "database": "postgres://db:5432/fg", "written_at": "", "catalog": {}}"#,
        )
        .unwrap();
        let err = cache.load().unwrap_err().to_string();
        assert!(err.contains("format 2"), "{err}");
    }
}
