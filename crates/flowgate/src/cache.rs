//! The local catalog cache (D20): the source of the last catalog that built, kept in a file so
//! that a restart during a database outage still serves resolve.
//!
//! The file is JSON: a format number, the database it was read from ([`Store::identity`]: host,
//! port and database name, never credentials), when it was written, and the [`CatalogData`]
//! (key digests, never plaintext keys). It is written atomically (a temporary file beside it,
//! fsync, rename, fsync of the folder) with mode 0600, so a crash mid-write leaves the previous
//! file, and a reader never sees half of one. A file for another database, of a format this
//! build does not read or that does not parse is refused with a message saying which; the
//! server then starts as without a cache file (D20).
//!
//! # Versions
//!
//! The one place that says which versions of this file exist (D26); golden samples of each are
//! in `formats/flowgate.catalog-cache/v<N>/`, read by this module's tests.
//!
//! | `format` | written by | what changed |
//! |---|---|---|
//! | 1 | 0.1.0 and later | the first: `{format, database, written_at, catalog}` |
//!
//! This build writes [`FORMAT`] and reads every format from [`OLDEST_FORMAT`] to [`FORMAT`]. A
//! file of a newer format (written by a later release, before a rollback) is refused, saying
//! that it is newer and which formats this build reads: this build cannot know what changed,
//! so it starts without the cache (as with no file) rather than guess; the later release reads
//! this build's files. Members this build does not know are ignored at every level (no
//! `deny_unknown_fields` here or in [`CatalogData`]), and a missing optional member reads as
//! absent (`written_at` as unknown, a key's `revoked_at` as not revoked): adding an optional
//! member is not a new format. A new format number is for a change an older reader would
//! misread (a member removed, renamed or whose meaning changed); its reader then keeps
//! reading the previous formats, at least the previous release's.
//!
//! # Webhook keys are not cached
//!
//! The file holds every key of the catalog but the `webhook` keys of the store notification
//! routes (D30), whatever their state: [`CatalogCache::encode`] leaves them out, so a server
//! started from the cache refuses those keys as unknown. Two reasons. Release 0.2.0 reads this
//! format and takes a key type it does not know for a file that does not decode, so one webhook
//! key in the file would leave a 0.2.0 replica beside this release (or after a rollback)
//! without its cache during an outage (D26). And a server started from the cache cannot reach
//! the store, where a notification must be stored before it is answered: authenticating it
//! would only lead to a 503, and its sender retries either way.
//!
//! [`Store::identity`]: flowgate_store::Store::identity

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use flowgate_domain::catalog::WorkspaceData;
use flowgate_domain::keys::{KeyRecord, KeyType};
use flowgate_domain::CatalogData;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The file format this build writes (see the module's Versions).
pub const FORMAT: u32 = 1;

/// The oldest file format this build reads (see the module's Versions).
pub const OLDEST_FORMAT: u32 = 1;

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
    catalog: CachedCatalog<'a>,
}

/// What of a [`CatalogData`] the file holds: all of it but the webhook keys (see the module's
/// doc), serialised as `CatalogData` serialises itself, without copying the catalog.
#[derive(Serialize)]
struct CachedCatalog<'a> {
    revision: u64,
    workspaces: &'a [WorkspaceData],
    #[serde(serialize_with = "serialize_cached_keys")]
    api_keys: &'a [KeyRecord],
}

impl<'a> CachedCatalog<'a> {
    fn of(data: &'a CatalogData) -> Self {
        // Every member named: one added to `CatalogData` fails to compile here until the file
        // says what becomes of it.
        let CatalogData {
            revision,
            workspaces,
            api_keys,
        } = data;
        Self {
            revision: *revision,
            workspaces,
            api_keys,
        }
    }
}

/// True for the keys the file holds: every type but `webhook`.
fn cached_key(key: &KeyRecord) -> bool {
    key.key_type != KeyType::Webhook
}

fn serialize_cached_keys<S: serde::Serializer>(
    keys: &&[KeyRecord],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(keys.iter().filter(|k| cached_key(k)))
}

#[derive(Deserialize)]
struct Header {
    format: u32,
    database: String,
}

/// The file as read: unknown members are ignored (no `deny_unknown_fields`), and a missing
/// `written_at` reads as unknown (empty).
#[derive(Deserialize)]
struct Stored {
    database: String,
    #[serde(default)]
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
    /// the write itself is only I/O), without its webhook keys (see the module's doc).
    pub fn encode(&self, data: &CatalogData) -> Result<Vec<u8>, serde_json::Error> {
        let written_at = OffsetDateTime::now_utc()
            .format(&Rfc3339)
            .unwrap_or_default();
        self.encode_at(data, written_at)
    }

    /// The file's bytes for `data`, written at `written_at` ([`FORMAT`]).
    fn encode_at(
        &self,
        data: &CatalogData,
        written_at: String,
    ) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&Envelope {
            format: FORMAT,
            database: &self.database,
            written_at,
            catalog: CachedCatalog::of(data),
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
        if header.format > FORMAT {
            return Err(unreadable(format!(
                "format {} is newer than this build reads (formats {OLDEST_FORMAT} to \
                 {FORMAT}): it was written by a later release",
                header.format
            )));
        }
        if header.format < OLDEST_FORMAT {
            return Err(unreadable(format!(
                "format {} is no longer read by this build (formats {OLDEST_FORMAT} to \
                 {FORMAT})",
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
        assert!(
            err.contains(&path.display().to_string())
                && err.contains(
                    "format 2 is newer than this build reads (formats 1 to 1): it was written by \
                     a later release"
                ),
            "{err}"
        );
        fs::write(
            &path,
            br#"{"format": 0, "database": "postgres://db:5432/fg", "written_at": "", "catalog": {}}"#,
        )
        .unwrap();
        let err = cache.load().unwrap_err().to_string();
        assert!(err.contains("format 0 is no longer read"), "{err}");
    }

    /// Webhook keys (D30) stay out of the file, active or revoked; the other keys and the rest
    /// of the catalog are written as without them, so release 0.2.0, whose reader knows the
    /// types `sdk` and `secret` only, still reads the file.
    #[test]
    fn webhook_keys_are_left_out_of_the_file() {
        use flowgate_contract_tests::fixtures::{at, catalog, key_record, WS1, WS2};

        let sdk = key_record(WS1, 'a', at(0));
        let mut webhook = key_record(WS1, 'w', at(1));
        webhook.key_type = KeyType::Webhook;
        let mut revoked_webhook = key_record(WS2, 'v', at(2));
        revoked_webhook.key_type = KeyType::Webhook;
        revoked_webhook.revoked_at = Some(at(3));
        let secret = KeyRecord {
            key_type: KeyType::Secret,
            ..key_record(WS2, 's', at(4))
        };
        let with = CatalogData {
            revision: 9,
            api_keys: vec![
                sdk.clone(),
                webhook.clone(),
                revoked_webhook,
                secret.clone(),
            ],
            ..catalog()
        };
        let without = CatalogData {
            api_keys: vec![sdk.clone(), secret.clone()],
            ..with.clone()
        };
        let cache = CatalogCache::new("unused", SAMPLE_DATABASE);
        let written = cache
            .encode_at(&with, SAMPLE_WRITTEN_AT.to_owned())
            .unwrap();
        assert_eq!(
            String::from_utf8(written.clone()).unwrap(),
            String::from_utf8(
                cache
                    .encode_at(&without, SAMPLE_WRITTEN_AT.to_owned())
                    .unwrap()
            )
            .unwrap(),
            "the file is the catalog's without its webhook keys"
        );
        let text = String::from_utf8(written.clone()).unwrap();
        assert!(!text.contains("webhook"), "{text}");
        assert!(!text.contains(&webhook.digest.to_hex()), "{text}");

        // A reader that knows 0.2.0's key types only (its `KeyType`) reads every key.
        #[derive(Deserialize)]
        #[serde(rename_all = "lowercase")]
        enum TypeOf020 {
            Sdk,
            Secret,
        }
        #[derive(Deserialize)]
        struct KeyOf020 {
            key_type: TypeOf020,
        }
        #[derive(Deserialize)]
        struct CatalogOf020 {
            api_keys: Vec<KeyOf020>,
        }
        #[derive(Deserialize)]
        struct FileOf020 {
            catalog: CatalogOf020,
        }
        let old: FileOf020 = serde_json::from_slice(&written).expect("0.2.0 reads the file");
        let types: Vec<_> = old
            .catalog
            .api_keys
            .iter()
            .map(|k| match k.key_type {
                TypeOf020::Sdk => "sdk",
                TypeOf020::Secret => "secret",
            })
            .collect();
        assert_eq!(types, ["sdk", "secret"]);

        // Read back by this build: the same catalog without the webhook keys, so a server
        // started from the cache refuses them as unknown.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog-cache.json");
        let cache = CatalogCache::new(&path, SAMPLE_DATABASE);
        write(&cache, &with);
        let cached = cache.load().unwrap().unwrap();
        assert_eq!(cached.data.api_keys, [sdk, secret]);
        assert_eq!(text_of(&cached.data), text_of(&without));
        let catalog = flowgate_domain::Catalog::build(cached.data).unwrap();
        assert_eq!(catalog.key(&webhook.digest), None);
    }

    /// Everything but the revision, as JSON text.
    fn text_of(data: &CatalogData) -> String {
        text(&CatalogData {
            revision: 0,
            ..data.clone()
        })
    }

    /// The database recorded in the golden samples.
    const SAMPLE_DATABASE: &str = "postgres://db.example:5432/flowgate";
    /// The time recorded in the golden samples.
    const SAMPLE_WRITTEN_AT: &str = "2026-11-28T10:00:00Z";

    /// `formats/flowgate.catalog-cache/v<version>/cache.json`.
    fn sample(version: u32) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../formats/flowgate.catalog-cache")
            .join(format!("v{version}/cache.json"))
    }

    /// What the samples hold: the contract suite's catalog, a live and a revoked key.
    fn sample_data() -> CatalogData {
        use flowgate_contract_tests::fixtures::{at, catalog, key_record, WS1};
        let mut revoked = key_record(WS1, 'r', at(1));
        revoked.revoked_at = Some(at(2));
        CatalogData {
            revision: 42,
            api_keys: vec![key_record(WS1, 'a', at(0)), revoked],
            ..catalog()
        }
    }

    /// Everything of a catalog, as JSON text, to compare two of them.
    fn text(data: &CatalogData) -> String {
        serde_json::to_string(data).unwrap()
    }

    /// What this build writes is the current format's sample, byte for byte: a change to the
    /// file's shape fails here until it is a new format with a sample of its own. A missing
    /// sample is written with `WRITE_GOLDEN=1`; an existing one never is.
    #[test]
    fn this_build_writes_the_current_formats_sample() {
        let cache = CatalogCache::new(sample(FORMAT), SAMPLE_DATABASE);
        let bytes = cache
            .encode_at(&sample_data(), SAMPLE_WRITTEN_AT.to_owned())
            .unwrap();
        let path = sample(FORMAT);
        if !path.exists() && std::env::var("WRITE_GOLDEN").as_deref() == Ok("1") {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, &bytes).unwrap();
        }
        let expected = fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (WRITE_GOLDEN=1 writes it)", path.display()));
        assert!(
            expected == bytes,
            "the catalog cache file changed: a new format needs FORMAT raised and a sample of \
             its own\nexpected ({}):\n{}\nactual:\n{}",
            path.display(),
            String::from_utf8_lossy(&expected),
            String::from_utf8_lossy(&bytes)
        );
    }

    /// Every supported format's sample starts this build with the catalog it holds.
    #[test]
    fn every_supported_formats_sample_reads() {
        for version in OLDEST_FORMAT..=FORMAT {
            let cache = CatalogCache::new(sample(version), SAMPLE_DATABASE);
            let cached = cache
                .load()
                .unwrap_or_else(|e| panic!("v{version}: {e}"))
                .unwrap_or_else(|| panic!("v{version}: no sample"));
            assert_eq!(text(&cached.data), text(&sample_data()), "v{version}");
            assert_eq!(cached.written_at, SAMPLE_WRITTEN_AT, "v{version}");
            assert_eq!(
                cached.data.api_keys[1].revoked_at,
                sample_data().api_keys[1].revoked_at
            );
        }
    }

    /// A later release may add optional members anywhere in the file without a new format:
    /// this build ignores the ones it does not know and reads missing optional ones as absent.
    #[test]
    fn unknown_members_are_ignored_and_missing_optional_ones_are_absent() {
        // Edited as text: a generic JSON value would re-encode the exact `flow_schema`s.
        let mut file = String::from_utf8(fs::read(sample(FORMAT)).unwrap()).unwrap();
        let mut edit = |from: &str, to: &str| {
            assert_eq!(file.matches(from).count(), 1, "{from}");
            file = file.replacen(from, to, 1);
        };
        edit(
            r#""written_at":"2026-11-28T10:00:00Z","#,
            r#""added_by_a_later_release":{"any":["shape"]},"#,
        );
        edit(r#""catalog":{"#, r#""catalog":{"new_top":1,"#);
        edit(
            r#""name":"Acme","#,
            r#""name":"Acme","new_workspace_member":"x","#,
        );
        edit(
            r#""name":"Acme iOS","#,
            r#""name":"Acme iOS","new_app_member":true,"#,
        );
        edit(
            r#""name":"US onboarding","#,
            r#""name":"US onboarding","new_flow_member":null,"#,
        );
        edit(
            r#""version":2,"schema_version":3,"#,
            r#""version":2,"new_version_member":[],"schema_version":3,"#,
        );
        edit(
            r#"{"key":"empty","#,
            r#"{"key":"empty","new_placement_member":{},"#,
        );
        edit(
            r#"{"experiment":{"id":"50000000-0000-4000-8000-000000000001","#,
            r#"{"new_rule_member":2,"experiment":{"new_experiment_member":3,"id":"50000000-0000-4000-8000-000000000001","#,
        );
        edit(
            r#""name":"new","#,
            r#""name":"new","new_variant_member":4,"#,
        );
        edit(
            r#""name":"key r","#,
            r#""name":"key r","new_key_member":"y","#,
        );
        edit(r#","revoked_at":"2026-05-01T10:02:00.000002Z""#, "");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog-cache.json");
        fs::write(&path, &file).unwrap();
        let cached = CatalogCache::new(&path, SAMPLE_DATABASE)
            .load()
            .unwrap()
            .unwrap();
        assert_eq!(cached.written_at, "", "a missing written_at is unknown");
        assert_eq!(
            cached.data.api_keys[1].revoked_at, None,
            "missing: not revoked"
        );
        let mut expected = sample_data();
        expected.api_keys[1].revoked_at = None;
        assert_eq!(text(&cached.data), text(&expected));
    }
}
