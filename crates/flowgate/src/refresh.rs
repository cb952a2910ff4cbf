//! The catalog refresher (D12): waits for the store's changes through the [`CatalogSource`]
//! port and swaps a new snapshot in, so a published change is served within
//! `catalog.refresh_interval_ms`.
//!
//! What it remembers (`known`) is the revision of the snapshot it swapped in, or of a stored
//! catalog that does not build (rebuilding it in a loop would change nothing: the next change
//! is picked up), and nothing before either. A load that failed (the store dropped the
//! connection, a statement timed out) leaves `known` as it was, so the next pass loads the
//! change again.
//!
//! Each catalog loaded from the store that builds is written to the local cache
//! ([`CatalogCache`], D20); [`Refresher::serve_cache`] installs the cached one when the store
//! is unreachable at start, and the store's replaces it as soon as the store answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::web;
use flowgate_domain::catalog::CatalogError;
use flowgate_domain::ports::{CatalogSource, StoreError};
use flowgate_domain::{Catalog, CatalogData};
use flowgate_http::{ApiState, CatalogHandle};
use tokio::sync::watch;

use crate::cache::CatalogCache;
use crate::health::ServiceHealth;

/// Where a catalog being installed comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The store: confirmed current, and written to the cache once built.
    Store,
    /// The local cache (D20): served until the store answers.
    Cache,
}

/// Why a reload did not swap a snapshot in.
#[derive(Debug)]
pub enum ReloadError {
    /// The catalog could not be loaded: try again.
    Load(StoreError),
    /// The stored catalog at `revision` does not build: the last good snapshot keeps serving
    /// until the next change.
    Build {
        /// The broken revision.
        revision: u64,
        /// The problems.
        error: CatalogError,
    },
    /// The build task failed (a panic): try again.
    Task(String),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::Load(e) => write!(f, "loading the catalog failed: {e}"),
            ReloadError::Build { revision, error } => {
                write!(
                    f,
                    "the stored catalog (revision {revision}) does not build: {error}"
                )
            }
            ReloadError::Task(e) => write!(f, "building the catalog failed: {e}"),
        }
    }
}

/// Loads snapshots from a [`CatalogSource`] into the shared [`CatalogHandle`].
pub struct Refresher {
    /// Where catalogs come from: the store.
    pub source: Arc<dyn CatalogSource>,
    /// The snapshot the API serves.
    pub catalog: CatalogHandle,
    /// Health flags and counters.
    pub health: Arc<ServiceHealth>,
    /// The revision last swapped in from the store or found not to build (`known`, module
    /// doc).
    pub known: Option<u64>,
    /// The local copy of the last good catalog (`catalog.cache_path`), if any.
    pub cache: Option<Arc<CatalogCache>>,
}

impl Refresher {
    /// Loads the catalog and swaps it in; building (CPU-bound for large catalogs) runs off the
    /// async workers, and so does handing the API's per-version state (compressed flows) over
    /// to the new snapshot (`api`, absent on the first load). Returns the revision now served.
    pub async fn reload(&mut self, api: Option<&web::Data<ApiState>>) -> Result<u64, ReloadError> {
        let started = Instant::now();
        let data = match self.source.load_catalog().await {
            Ok(data) => data,
            Err(e) => {
                self.health.store_failed();
                return Err(ReloadError::Load(e));
            }
        };
        self.health.store_ok();
        let result = self.install(data, api, started, Origin::Store).await;
        match &result {
            Ok(revision) | Err(ReloadError::Build { revision, .. }) => self.known = Some(*revision),
            Err(_) => {}
        }
        result
    }

    /// Builds `data` and swaps it in; a catalog from the store that builds is then written
    /// to the cache (off the async workers; a failed write is logged and counted, and serving
    /// goes on).
    pub async fn install(
        &self,
        data: CatalogData,
        api: Option<&web::Data<ApiState>>,
        started: Instant,
        origin: Origin,
    ) -> Result<u64, ReloadError> {
        let revision = data.revision;
        let api = api.cloned();
        let cache = self.cache.clone().filter(|_| origin == Origin::Store);
        let health = self.health.clone();
        let built = tokio::task::spawn_blocking(move || -> Result<_, CatalogError> {
            // Encoded before the build consumes the data, written only once it built: the
            // cache holds the last good catalog.
            let encoded = cache.as_ref().map(|cache| cache.encode(&data));
            let snapshot = Catalog::build(data)?;
            let carried = api.map_or(0, |api| api.prepare_snapshot(&snapshot));
            if let (Some(cache), Some(encoded)) = (cache, encoded) {
                let written = encoded
                    .map_err(std::io::Error::other)
                    .and_then(|bytes| cache.write(&bytes));
                if let Err(error) = written {
                    health.catalog_cache_write_failed();
                    tracing::warn!(path = %cache.path().display(), %error, "cannot write the catalog cache; a restart during a store outage would not find this catalog");
                }
            }
            Ok((snapshot, carried))
        })
        .await
        .map_err(|e| ReloadError::Task(e.to_string()))?;
        match built {
            Ok((snapshot, carried)) => {
                let previous = Arc::downgrade(&self.catalog.swap(Arc::new(snapshot)));
                match origin {
                    Origin::Store => self.health.catalog_reloaded(),
                    Origin::Cache => self.health.catalog_from_cache(),
                }
                // The load's intermediate data is free now, and the previous snapshot once the
                // requests in flight and every worker's held copy let go of it (a worker's next
                // request or its sweeper, within a second): give the pages back then
                // (src/heap.rs).
                tokio::spawn(crate::heap::release_once_freed(
                    previous,
                    crate::heap::RELEASE_POLL,
                    crate::heap::RELEASE_WAIT_MAX,
                    crate::heap::release_free_memory,
                ));
                tracing::info!(
                    revision,
                    from = if origin == Origin::Store {
                        "store"
                    } else {
                        "cache"
                    },
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    compressed_flows_kept = carried,
                    "catalog loaded"
                );
                Ok(revision)
            }
            Err(error) => {
                self.health.catalog_build_failed();
                tracing::error!(revision, problems = error.problems.len(), first = %error.problems.first().map(ToString::to_string).unwrap_or_default(), "the stored catalog does not build; keeping the last good snapshot");
                Err(ReloadError::Build { revision, error })
            }
        }
    }

    /// Serves the cached catalog (D20), when there is a usable one: for a start whose first
    /// load failed because the store is unreachable. Returns whether it did; a cache that
    /// cannot be used (another database, unreadable) is logged and left alone. `known` stays
    /// unset, so the store's catalog replaces it as soon as the store answers.
    pub async fn serve_cache(&self) -> bool {
        let Some(cache) = self.cache.clone() else {
            return false;
        };
        let started = Instant::now();
        let loaded = tokio::task::spawn_blocking(move || cache.load()).await;
        let cached = match loaded {
            Ok(Ok(Some(cached))) => cached,
            Ok(Ok(None)) => {
                tracing::warn!("no catalog cache file: not ready until the store answers");
                return false;
            }
            Ok(Err(error)) => {
                tracing::error!(%error, "not ready until the store answers");
                return false;
            }
            Err(error) => {
                tracing::error!(%error, "reading the catalog cache failed");
                return false;
            }
        };
        let (revision, written_at) = (cached.data.revision, cached.written_at);
        match self
            .install(cached.data, None, started, Origin::Cache)
            .await
        {
            Ok(_) => {
                tracing::warn!(
                    revision,
                    written_at,
                    "the store is unreachable: serving the cached catalog until it answers"
                );
                true
            }
            Err(error) => {
                tracing::error!(%error, "the cached catalog does not build; not ready until the store answers");
                false
            }
        }
    }

    /// Waits for store changes and reloads (D12) until `stop` turns true. While the store
    /// fails, the last snapshot keeps serving and the loop retries with a growing pause.
    pub async fn run(
        mut self,
        api: Option<web::Data<ApiState>>,
        interval: Duration,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut failures: u32 = 0;
        loop {
            let started = Instant::now();
            let outcome = tokio::select! {
                result = self.source.wait_for_change(self.known.unwrap_or(u64::MAX), interval) => result,
                _ = stop.changed() => return,
            };
            let failed = match outcome {
                Ok(revision) if Some(revision) != self.known => {
                    self.health.store_ok();
                    match self.reload(api.as_ref()).await {
                        // A catalog that does not build is remembered too: not rebuilt in a
                        // loop, the next change is picked up.
                        Ok(_) | Err(ReloadError::Build { .. }) => None,
                        // `known` stays: the next pass loads the change again.
                        Err(e) => Some(e.to_string()),
                    }
                }
                Ok(_) => {
                    self.health.store_ok();
                    self.health.catalog_fresh();
                    if started.elapsed() < interval / 4 {
                        // A source that cannot wait answered at once: pace the polling.
                        pause(interval, &mut stop).await;
                    }
                    None
                }
                Err(e) => {
                    self.health.store_failed();
                    Some(e.to_string())
                }
            };
            match failed {
                Some(error) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(%error, failures, "the store is failing; serving the last catalog snapshot");
                    pause(interval.saturating_mul(failures.min(5)), &mut stop).await;
                }
                None => failures = 0,
            }
            if *stop.borrow() {
                return;
            }
        }
    }
}

async fn pause(duration: Duration, stop: &mut watch::Receiver<bool>) {
    tokio::select! {
        _ = tokio::time::sleep(duration) => {}
        _ = stop.changed() => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Mutex;

    use arc_swap::ArcSwap;
    use flowgate_domain::catalog::{FlowData, WorkspaceData};
    use flowgate_domain::ids::{AppId, FlowId, WorkspaceId};
    use flowgate_domain::ports::{BoxFuture, Outage};

    use super::*;

    /// A catalog source whose revision and data the test sets, and whose loads or waits fail
    /// on command.
    #[derive(Default)]
    struct Source {
        revision: AtomicU64,
        data: Mutex<CatalogData>,
        failing_loads: AtomicBool,
        /// Fail this many more loads.
        fail_next_loads: AtomicU64,
        down: AtomicBool,
        loads: AtomicU64,
    }

    impl Source {
        /// Publishes a change: a catalog with `apps` apps (or one that does not build).
        fn publish(&self, apps: usize, builds: bool) {
            let mut data = CatalogData::default();
            let workspace = WorkspaceId::from_uuid(uuid::Uuid::from_u128(1));
            let mut ws = WorkspaceData {
                id: workspace,
                name: "w".to_owned(),
                apps: Vec::new(),
            };
            for n in 0..apps {
                let mut app: flowgate_domain::catalog::AppData = serde_json::from_value(
                    serde_json::json!({"id": AppId::from_uuid(uuid::Uuid::from_u128(100 + n as u128)),
                        "name": "a", "media_base_url": "https://m/", "icon_base_url": "https://i/"}),
                )
                .unwrap();
                if !builds {
                    // Published version 9 does not exist: the catalog does not build.
                    app.flows.push(FlowData {
                        id: FlowId::from_uuid(uuid::Uuid::from_u128(900)),
                        name: "f".to_owned(),
                        published_version: Some(9),
                        versions: Vec::new(),
                    });
                }
                ws.apps.push(app);
            }
            data.workspaces.push(ws);
            *self.data.lock().unwrap() = data;
            self.revision.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl CatalogSource for Source {
        fn load_catalog(&self) -> BoxFuture<'_, Result<CatalogData, StoreError>> {
            self.loads.fetch_add(1, Ordering::SeqCst);
            let fail_next = self
                .fail_next_loads
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            let result = if self.down.load(Ordering::SeqCst)
                || self.failing_loads.load(Ordering::SeqCst)
                || fail_next
            {
                Err(StoreError::Unavailable {
                    reason: Outage::Connection,
                    detail: "connection reset".to_owned(),
                })
            } else {
                let mut data = self.data.lock().unwrap().clone();
                data.revision = self.revision.load(Ordering::SeqCst);
                Ok(data)
            };
            Box::pin(std::future::ready(result))
        }

        fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
            Box::pin(std::future::ready(Ok(self.revision.load(Ordering::SeqCst))))
        }

        fn wait_for_change(
            &self,
            known: u64,
            max_wait: Duration,
        ) -> BoxFuture<'_, Result<u64, StoreError>> {
            Box::pin(async move {
                let end = tokio::time::Instant::now() + max_wait;
                loop {
                    if self.down.load(Ordering::SeqCst) {
                        return Err(StoreError::Unavailable {
                            reason: Outage::Connection,
                            detail: "down".to_owned(),
                        });
                    }
                    let now = self.revision.load(Ordering::SeqCst);
                    if now != known || tokio::time::Instant::now() >= end {
                        return Ok(now);
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
        }
    }

    struct Running {
        source: Arc<Source>,
        catalog: CatalogHandle,
        health: Arc<ServiceHealth>,
        stop: watch::Sender<bool>,
        task: tokio::task::JoinHandle<()>,
    }

    const INTERVAL: Duration = Duration::from_millis(20);

    /// A refresher that loaded the source's first catalog (one app) and runs.
    async fn running() -> Running {
        start(true).await
    }

    /// A refresher that loaded the source's first catalog (one app; one that does not build
    /// unless `builds`), as `serve` does at start, and runs.
    async fn start(builds: bool) -> Running {
        start_with(builds, None).await
    }

    /// As [`start`], with a catalog cache.
    async fn start_with(builds: bool, cache: Option<Arc<CatalogCache>>) -> Running {
        let source = Arc::new(Source::default());
        source.publish(1, builds);
        let catalog: CatalogHandle = Arc::new(ArcSwap::from_pointee(Catalog::empty()));
        let health = Arc::new(ServiceHealth::default());
        let mut refresher = Refresher {
            source: source.clone(),
            catalog: catalog.clone(),
            health: health.clone(),
            known: None,
            cache,
        };
        assert_eq!(refresher.reload(None).await.is_ok(), builds);
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(refresher.run(None, INTERVAL, stopped));
        Running {
            source,
            catalog,
            health,
            stop,
            task,
        }
    }

    impl Running {
        async fn served(&self, apps: usize) -> bool {
            for _ in 0..200 {
                if self.catalog.load().app_count() == apps {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            false
        }

        async fn finish(self) {
            self.stop.send(true).unwrap();
            self.task.await.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_published_change_is_served() {
        let r = running().await;
        r.source.publish(2, true);
        assert!(r.served(2).await);
        r.finish().await;
    }

    /// The change whose load failed is loaded again on the next pass, not skipped until
    /// another change comes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_change_whose_load_failed_is_loaded_again() {
        let r = running().await;
        r.source.failing_loads.store(true, Ordering::SeqCst);
        r.source.publish(2, true);
        // The refresher saw the change and failed to load it, at least once.
        for _ in 0..200 {
            if r.source.loads.load(Ordering::SeqCst) >= 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(r.source.loads.load(Ordering::SeqCst) >= 3);
        assert_eq!(r.catalog.load().app_count(), 1);
        r.source.failing_loads.store(false, Ordering::SeqCst);
        assert!(r.served(2).await, "the change was skipped");
        r.finish().await;
    }

    /// A catalog that does not build is not rebuilt in a loop, even the first one (nothing
    /// to serve yet), and the next change is picked up; a broken change keeps the last good
    /// snapshot serving.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_catalog_that_does_not_build_is_built_once() {
        let r = start(false).await;
        tokio::time::sleep(INTERVAL * 10).await;
        assert_eq!(
            r.source.loads.load(Ordering::SeqCst),
            1,
            "not rebuilt in a loop"
        );
        assert!(!r.health.catalog_loaded());
        r.source.publish(2, true);
        assert!(r.served(2).await);
        let before = r.source.loads.load(Ordering::SeqCst);
        r.source.publish(3, false);
        tokio::time::sleep(INTERVAL * 10).await;
        assert_eq!(r.source.loads.load(Ordering::SeqCst) - before, 1);
        assert_eq!(
            r.catalog.load().app_count(),
            2,
            "the last good snapshot serves"
        );
        r.source.publish(4, true);
        assert!(r.served(4).await);
        r.finish().await;
    }

    /// While the store is down the last snapshot serves and readiness says so; a change
    /// published during the outage is served once it is back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_change_during_an_outage_is_served_after_it() {
        let r = running().await;
        r.source.down.store(true, Ordering::SeqCst);
        tokio::time::sleep(INTERVAL * 3).await;
        assert!(!r.health.store_healthy());
        r.source.publish(5, true);
        tokio::time::sleep(INTERVAL * 3).await;
        assert_eq!(r.catalog.load().app_count(), 1, "the last snapshot serves");
        // Back, but the first load fails (a pooled connection the outage broke).
        r.source.fail_next_loads.store(1, Ordering::SeqCst);
        r.source.down.store(false, Ordering::SeqCst);
        assert!(r.served(5).await);
        assert!(r.health.store_healthy());
        r.finish().await;
    }

    fn cached_apps(cache: &CatalogCache) -> Option<usize> {
        cache
            .load()
            .unwrap()
            .map(|c| c.data.workspaces.iter().map(|w| w.apps.len()).sum())
    }

    async fn eventually(mut condition: impl FnMut() -> bool) -> bool {
        for _ in 0..200 {
            if condition() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }

    /// Each catalog from the store that builds is written to the cache (D20); one that does
    /// not build leaves the last good one there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_cache_holds_the_last_catalog_that_built() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(CatalogCache::new(
            dir.path().join("catalog-cache.json"),
            "postgres://db:5432/fg",
        ));
        let r = start_with(true, Some(cache.clone())).await;
        assert_eq!(cached_apps(&cache), Some(1));
        r.source.publish(2, true);
        assert!(r.served(2).await);
        assert!(eventually(|| cached_apps(&cache) == Some(2)).await);
        r.source.publish(3, false);
        tokio::time::sleep(INTERVAL * 10).await;
        assert_eq!(
            cached_apps(&cache),
            Some(2),
            "the broken catalog is not cached"
        );
        assert!(!r.health.catalog_cached());
        r.finish().await;
    }

    /// A start with the store down serves the cached catalog, says so, and serves the
    /// store's as soon as it answers (even at the same revision: it was never confirmed).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_start_without_the_store_serves_the_cache_until_the_store_answers() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(CatalogCache::new(
            dir.path().join("catalog-cache.json"),
            "postgres://db:5432/fg",
        ));
        // An earlier process cached a catalog of 3 apps.
        let source = Arc::new(Source::default());
        source.publish(3, true);
        let stored = source.load_catalog().await.unwrap();
        cache.write(&cache.encode(&stored).unwrap()).unwrap();
        source.publish(4, true);
        source.down.store(true, Ordering::SeqCst);

        let catalog: CatalogHandle = Arc::new(ArcSwap::from_pointee(Catalog::empty()));
        let health = Arc::new(ServiceHealth::default());
        let mut refresher = Refresher {
            source: source.clone(),
            catalog: catalog.clone(),
            health: health.clone(),
            known: None,
            cache: Some(cache.clone()),
        };
        assert!(matches!(
            refresher.reload(None).await,
            Err(ReloadError::Load(_))
        ));
        assert!(refresher.serve_cache().await);
        assert_eq!(catalog.load().app_count(), 3);
        assert!(health.catalog_loaded() && health.catalog_cached());
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(refresher.run(None, INTERVAL, stopped));
        tokio::time::sleep(INTERVAL * 5).await;
        assert_eq!(catalog.load().app_count(), 3, "the cache serves meanwhile");
        source.down.store(false, Ordering::SeqCst);
        assert!(eventually(|| catalog.load().app_count() == 4).await);
        // The flag follows the swap (a moment later, in the refresher's task).
        assert!(eventually(|| !health.catalog_cached()).await);
        assert_eq!(cached_apps(&cache), Some(4));
        stop.send(true).unwrap();
        task.await.unwrap();
    }

    /// A cache of another database is not served; neither is a missing one.
    #[tokio::test]
    async fn a_cache_of_another_database_or_none_is_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog-cache.json");
        let source = Arc::new(Source::default());
        let mut refresher = Refresher {
            source: source.clone(),
            catalog: Arc::new(ArcSwap::from_pointee(Catalog::empty())),
            health: Arc::new(ServiceHealth::default()),
            known: None,
            cache: Some(Arc::new(CatalogCache::new(&path, "postgres://a:5432/fg"))),
        };
        assert!(!refresher.serve_cache().await, "no file");
        source.publish(2, true);
        let other = CatalogCache::new(&path, "postgres://b:5432/fg");
        other
            .write(&other.encode(&source.load_catalog().await.unwrap()).unwrap())
            .unwrap();
        assert!(!refresher.serve_cache().await, "another database's");
        assert!(!refresher.health.catalog_loaded());
        refresher.cache = None;
        assert!(!refresher.serve_cache().await, "no cache configured");
    }
}
