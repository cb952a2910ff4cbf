//! What the admin API and the console both serve from: the explain and results accesses
//! (token, live catalog, settings) and the constant-time token comparison. A leaf of both, so
//! neither depends on the other for them.

use std::sync::Arc;

use flowgate_domain::ports::ResultsSource;

use crate::results::ResultsMetrics;
use crate::state::CatalogHandle;
use flowgate_control::results::{experiment_report, ReportError, ReportParams, ResultsSettings};

/// What the explain endpoint (D18) needs: the token callers must present, the live catalog,
/// and the settings resolve renders with.
#[derive(Clone)]
pub struct ExplainAccess {
    /// `admin.token`: requests must send `Authorization: Bearer <token>`.
    pub token: String,
    /// The catalog resolve serves.
    pub catalog: CatalogHandle,
    /// `cache_ttl_seconds` for apps without their own (as resolve renders it).
    pub default_ttl: u32,
    /// Largest request body, in bytes (resolve's limit).
    pub body_limit: usize,
    /// How fast the body must arrive (resolve's pace, D25).
    pub body_pace: crate::config::BodyPace,
    /// Where stored assignments are read (D23), as resolve reads them.
    pub sticky: Option<Arc<dyn flowgate_domain::ports::StickyStore>>,
}

impl std::fmt::Debug for ExplainAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExplainAccess")
            .field("token", &"<redacted>")
            .field("default_ttl", &self.default_ttl)
            .field("body_limit", &self.body_limit)
            .finish_non_exhaustive()
    }
}

/// What the results endpoints (D22) need: the token callers must present, the live catalog
/// (which names the experiments), where results are read, and how revenue is reported.
#[derive(Clone)]
pub struct ResultsAccess {
    /// `admin.token`: requests must send `Authorization: Bearer <token>`.
    pub token: String,
    /// The catalog resolve serves.
    pub catalog: CatalogHandle,
    /// The results store: its own small pool, under `experiments.query_timeout_ms`.
    pub source: Arc<dyn ResultsSource>,
    /// `experiments.currency` and `experiments.exchange_rates`.
    pub settings: ResultsSettings,
    /// Report queries' metrics.
    pub metrics: ResultsMetrics,
}

impl ResultsAccess {
    /// The report of experiment `id` (as written in a URL) on the live catalog, read and
    /// counted in the results metrics: what the admin API and the console answer.
    pub(crate) async fn report(
        &self,
        id: &str,
        params: &ReportParams,
    ) -> Result<flowgate_domain::results::ExperimentReport, ReportError> {
        let catalog = self.catalog.load();
        let started = std::time::Instant::now();
        let report = experiment_report(
            &catalog,
            self.source.as_ref(),
            id,
            params,
            &self.settings,
            time::OffsetDateTime::now_utc(),
        )
        .await;
        self.metrics.observe(started.elapsed(), &report);
        report
    }
}

impl std::fmt::Debug for ResultsAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultsAccess")
            .field("token", &"<redacted>")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Equal strings, compared in time that depends only on their lengths.
pub(crate) fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}
