//! The embedder's facade (D31): one [`Engine`] holding the live catalog, swapped atomically,
//! and the [`Snapshot`]s requests read it through.
//!
//! ```
//! use flowgate_domain::engine::Engine;
//! use flowgate_domain::{Platform, ResolveRequest};
//!
//! let file = include_str!("../examples/catalog.json");
//! let engine = Engine::from_catalog_file(file)?;
//! let app = "9b2f3c70-0000-4000-8000-0000000000a1".parse()?;
//! let attributes = serde_json::json!({"country": "US"});
//! let attributes = attributes.as_object().ok_or("an object")?;
//! let request = ResolveRequest::new("user-1", "session-1", Platform::Ios, attributes);
//!
//! // A request reads one snapshot from start to end, whatever swaps meanwhile.
//! let snapshot = engine.snapshot();
//! let resolution = snapshot.resolve(app, "paywall", &request)?;
//! assert!(resolution.version().is_some());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! An [`Engine`] is `Send + Sync`: share it (in an `Arc`, or a `static`) between threads and
//! tasks. [`Engine::snapshot`] costs one reference count and a lock held for that increment
//! only; what a [`Snapshot`] answers borrows from it, so a resolve copies no flow. A swap
//! ([`Engine::swap`], [`Engine::swap_file`]) never blocks a reader for longer than that, and
//! requests that took the previous snapshot finish on it.

use std::sync::{Arc, RwLock};

use serde_json::Value;
use time::OffsetDateTime;

use crate::catalog::{plan_import, CatalogData, CatalogFile, Problem};
use crate::events::{validate_event, AnalyticsEvent, EventError, ValidationLimits};
use crate::explain::Explanation;
use crate::ids::AppId;
use crate::resolve::{BatchEntry, BatchError, ResolveMode};
use crate::{Catalog, CatalogError, Resolution, ResolveRequest};

/// Why an engine was not built or a request not answered.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The catalog file is not one (its structure), every problem with its JSON pointer.
    #[error("the catalog file is invalid: {} problem(s), first: {}", .0.len(), .0.first().map(ToString::to_string).unwrap_or_default())]
    File(Vec<Problem>),
    /// The catalog it holds cannot be served (references, conditions, weights).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// No app with this id in the catalog.
    #[error("no app {0} in the catalog")]
    UnknownApp(AppId),
    /// A batch's keys break D6's limits.
    #[error(transparent)]
    Batch(#[from] BatchError),
}

/// The live catalog of an embedding service (D31): built from a catalog file or a
/// [`Catalog`], read through [`Snapshot`]s, replaced whole and atomically.
#[derive(Debug)]
pub struct Engine {
    current: RwLock<Arc<Catalog>>,
}

impl Engine {
    /// An engine serving `catalog`.
    pub fn new(catalog: Catalog) -> Engine {
        Engine {
            current: RwLock::new(Arc::new(catalog)),
        }
    }

    /// An engine serving the catalog file `json` (D13, every format this release reads), as
    /// `flowgate import` would store it: its API keys kept as digests only.
    pub fn from_catalog_file(json: &str) -> Result<Engine, EngineError> {
        Ok(Engine::new(catalog_of_file(json)?))
    }

    /// The catalog now, for one request: it stays whole and unchanged while held, whatever is
    /// swapped in meanwhile.
    pub fn snapshot(&self) -> Snapshot {
        // A poisoned lock still holds a whole catalog: a swap only replaces the `Arc`.
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        Snapshot(Arc::clone(&current))
    }

    /// Serves `catalog` from now on; returns the one it replaces.
    pub fn swap(&self, catalog: Catalog) -> Arc<Catalog> {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *current, Arc::new(catalog))
    }

    /// Serves the catalog file `json` from now on, if it is valid; otherwise the catalog
    /// served stays, and the error says why.
    pub fn swap_file(&self, json: &str) -> Result<Arc<Catalog>, EngineError> {
        Ok(self.swap(catalog_of_file(json)?))
    }
}

/// The catalog a file holds, validated and compiled.
fn catalog_of_file(json: &str) -> Result<Catalog, EngineError> {
    let file = CatalogFile::parse(json).map_err(EngineError::File)?;
    // Keys get a creation time the engine never reads.
    let plan = plan_import(file, &CatalogData::default(), OffsetDateTime::UNIX_EPOCH)
        .map_err(EngineError::File)?;
    Ok(Catalog::build(plan.write)?)
}

/// One catalog, as an [`Engine`] served it when taken: what a request reads from start to end.
#[derive(Clone, Debug)]
pub struct Snapshot(Arc<Catalog>);

impl Snapshot {
    /// The catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.0
    }

    fn app(&self, app: AppId) -> Result<&crate::catalog::App, EngineError> {
        self.0.app(app).ok_or(EngineError::UnknownApp(app))
    }

    /// Resolves placement `placement` of `app` for `request` (D3): the flow version served and
    /// the experiment's assignment, or why there is none. An unknown placement is no flow with
    /// reason `unknown_placement`, as in the HTTP API.
    pub fn resolve(
        &self,
        app: AppId,
        placement: &str,
        request: &ResolveRequest<'_>,
    ) -> Result<Resolution<'_>, EngineError> {
        Ok(self
            .app(app)?
            .resolve(placement, request, ResolveMode::Normal))
    }

    /// Resolves several placements of `app` at once (D6): keys de-duplicated keeping the first,
    /// at most 50, each well-formed.
    pub fn resolve_batch<'k, K: AsRef<str>>(
        &self,
        app: AppId,
        placements: &'k [K],
        request: &ResolveRequest<'_>,
    ) -> Result<Vec<BatchEntry<'_, 'k>>, EngineError> {
        Ok(self.app(app)?.resolve_batch(placements, request)?)
    }

    /// What [`Snapshot::resolve`] does for `request`, step by step, and why (D18).
    pub fn explain(
        &self,
        app: AppId,
        placement: &str,
        request: &ResolveRequest<'_>,
    ) -> Result<Explanation<'_>, EngineError> {
        Ok(self.app(app)?.explain(placement, request))
    }

    /// Validates an analytics event of `app` as `POST /v1/apps/{appId}/events` does (D7): the
    /// event to store, or why it is refused.
    pub fn validate_event(
        &self,
        raw: &Value,
        app: AppId,
        now: OffsetDateTime,
        limits: &ValidationLimits,
    ) -> Result<AnalyticsEvent, EventError> {
        validate_event(raw, app, self.catalog(), now, limits)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Platform;

    const FILE: &str = include_str!("../examples/catalog.json");
    const APP: &str = "9b2f3c70-0000-4000-8000-0000000000a1";

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn an_engine_is_shared_and_swapped_while_snapshots_keep_their_catalog() {
        assert_send_sync::<Engine>();
        assert_send_sync::<Snapshot>();
        let engine = Engine::from_catalog_file(FILE).expect("the example file is valid");
        let app: AppId = APP.parse().unwrap();
        let attributes = json!({"country": "US"});
        let request =
            ResolveRequest::new("u1", "s1", Platform::Ios, attributes.as_object().unwrap());
        let before = engine.snapshot();
        assert!(before
            .resolve(app, "paywall", &request)
            .unwrap()
            .version()
            .is_some());

        // A file without the paywall placement's rules: a new snapshot sees it, the old one not.
        let mut changed: Value = serde_json::from_str(FILE).unwrap();
        for placement in changed["workspaces"][0]["apps"][0]["placements"]
            .as_array_mut()
            .unwrap()
        {
            placement["rules"] = json!([]);
            placement.as_object_mut().unwrap().remove("default_flow_id");
        }
        engine.swap_file(&changed.to_string()).expect("valid");
        let after = engine.snapshot();
        assert!(after
            .resolve(app, "paywall", &request)
            .unwrap()
            .version()
            .is_none());
        assert!(before
            .resolve(app, "paywall", &request)
            .unwrap()
            .version()
            .is_some());

        // An invalid file leaves the catalog served; its problems are said.
        let error = engine
            .swap_file("{\"workspaces\": 1}")
            .expect_err("refused");
        assert!(
            matches!(&error, EngineError::File(p) if p[0].pointer == "/workspaces"),
            "{error}"
        );
        assert!(Arc::ptr_eq(&engine.snapshot().0, &after.0));

        // Unknown apps and bad batches are errors; an unknown placement is no flow.
        let other: AppId = "00000000-0000-4000-8000-000000000000".parse().unwrap();
        assert_eq!(
            after.resolve(other, "paywall", &request).map(|_| ()),
            Err(EngineError::UnknownApp(other))
        );
        assert!(matches!(
            before.resolve_batch(app, &["paywall", "bad key!"], &request),
            Err(EngineError::Batch(_))
        ));
        let batch = before
            .resolve_batch(app, &["paywall", "nowhere", "paywall"], &request)
            .unwrap();
        assert_eq!(batch.len(), 2, "de-duplicated");
        let explained = before.explain(app, "paywall", &request).unwrap();
        assert_eq!(
            explained.resolution.version().map(|v| v.id()),
            before
                .resolve(app, "paywall", &request)
                .unwrap()
                .version()
                .map(|v| v.id()),
            "explain and resolve agree"
        );
    }
}
