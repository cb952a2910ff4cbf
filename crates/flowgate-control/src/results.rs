//! Reading experiment results (D22): the list of experiments and the report of one, made the
//! same way for every caller (the command line, the admin API, the console): the catalog names
//! the experiment, the store's [`ResultsSource`] aggregates its events, the domain's [`report`]
//! computes the figures.

use std::collections::BTreeMap;

use flowgate_domain::catalog::{App, Experiment};
use flowgate_domain::events::EventType;
use flowgate_domain::ids::{AppId, ExperimentId};
use flowgate_domain::ports::{Outage, ResultsSource, StoreError};
use flowgate_domain::results::{
    report, ExperimentReport, ExposureCountQuery, Method, ResultsQuery, SequentialConfig,
};
use flowgate_domain::text::rfc3339;
use flowgate_domain::Catalog;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// How revenue is reported (`experiments.currency`, `experiments.exchange_rates`,
/// `stores.horizon_days`).
#[derive(Clone, Debug, PartialEq)]
pub struct ResultsSettings {
    /// The reporting currency.
    pub currency: String,
    /// 1 unit of each currency in the reporting currency.
    pub exchange_rates: BTreeMap<String, f64>,
    /// Store transactions count within this many days of first exposure (D30).
    pub horizon_days: u32,
}

impl Default for ResultsSettings {
    fn default() -> Self {
        Self {
            currency: "USD".to_owned(),
            exchange_rates: BTreeMap::new(),
            horizon_days: 30,
        }
    }
}

/// What a report is asked for: the window and the conversions beyond the defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReportParams {
    /// Exposures from (inclusive); `None`: all.
    pub from: Option<OffsetDateTime>,
    /// Up to (inclusive); `None`: now.
    pub to: Option<OffsetDateTime>,
    /// More conversion metrics.
    pub metrics: Vec<EventType>,
    /// The method for this report only (`--method`, `method=`); `None`: the experiment's
    /// analysis settings say (D27).
    pub method: Option<Method>,
    /// Store transactions count within this many days of first exposure (`--horizon`,
    /// `horizon=`, D30); `None`: `stores.horizon_days`.
    pub horizon_days: Option<u32>,
}

impl ReportParams {
    /// Parses the parameters as the command line and the query string give them. `method` is
    /// `sequential`, or `fixed` (also spelt `fixed_horizon`, as reports name it).
    pub fn parse(
        from: Option<&str>,
        to: Option<&str>,
        metrics: &[&str],
        method: Option<&str>,
    ) -> Result<Self, ReportError> {
        let time = |param: &'static str, value: Option<&str>| {
            value
                .map(|v| {
                    OffsetDateTime::parse(v, &Rfc3339).map_err(|_| ReportError::InvalidParam {
                        param,
                        message: format!(
                            "{v:?} is not an RFC 3339 time with an offset (e.g. 2026-11-01T00:00:00Z)"
                        ),
                    })
                })
                .transpose()
        };
        // `from` after `to` is refused with the report, which knows the end when `to` is not
        // given (now).
        let (from, to) = (time("from", from)?, time("to", to)?);
        let metrics = metrics
            .iter()
            .map(|m| {
                EventType::parse(m).ok_or_else(|| ReportError::InvalidParam {
                    param: "metric",
                    message: format!(
                        "{m:?} is not a recognized event type; one of: {}",
                        EventType::SDK_TYPES
                            .iter()
                            .map(|t| t.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })
            })
            .collect::<Result<_, _>>()?;
        let method = method
            .map(|m| match m {
                "sequential" => Ok(Method::Sequential(SequentialConfig::default())),
                "fixed" | "fixed_horizon" => Ok(Method::FixedHorizon),
                _ => Err(ReportError::InvalidParam {
                    param: "method",
                    message: format!("{m:?} is not a method; one of: fixed, sequential"),
                }),
            })
            .transpose()?;
        Ok(Self {
            from,
            to,
            metrics,
            method,
            horizon_days: None,
        })
    }

    /// The same parameters with `horizon` (`--horizon DAYS`, `horizon=`: D30), 1 to 3650 days.
    pub fn with_horizon(mut self, horizon: Option<&str>) -> Result<Self, ReportError> {
        self.horizon_days = horizon
            .map(|h| {
                h.parse::<u32>()
                    .ok()
                    .filter(|d| (1..=3650).contains(d))
                    .ok_or_else(|| ReportError::InvalidParam {
                        param: "horizon",
                        message: format!("{h:?} is not a number of days from 1 to 3650"),
                    })
            })
            .transpose()?;
        Ok(self)
    }
}

/// Why a report or a list could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// No experiment with this id in the catalog.
    #[error("no experiment {0:?} in the catalog")]
    UnknownExperiment(String),
    /// No app with this id in the catalog (a list of one app's experiments).
    #[error("no app {0:?} in the catalog")]
    UnknownApp(String),
    /// A parameter is not acceptable: which one and why (quoting the value).
    #[error("invalid {param}: {message}")]
    InvalidParam {
        /// `from`, `to`, `metric`, `method`, `horizon`, `experiment_id`, `app_id`.
        param: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The store failed, or the query ran past `experiments.query_timeout_ms`.
    #[error("the results could not be read: {0}")]
    Store(StoreError),
}

/// The report of experiment `id` (its text, as given): the catalog names it, `source`
/// aggregates its events, the domain computes the figures.
pub async fn experiment_report(
    catalog: &Catalog,
    source: &dyn ResultsSource,
    id: &str,
    params: &ReportParams,
    settings: &ResultsSettings,
    now: OffsetDateTime,
) -> Result<ExperimentReport, ReportError> {
    let experiment_id: ExperimentId = id.parse().map_err(|_| ReportError::InvalidParam {
        param: "experiment_id",
        message: format!("{id:?} is not a UUID in its hyphenated form"),
    })?;
    let (app, experiment) = catalog
        .experiment(experiment_id)
        .ok_or_else(|| ReportError::UnknownExperiment(id.to_owned()))?;
    let to = params.to.unwrap_or(now);
    if params.from.is_some_and(|from| from > to) {
        return Err(ReportError::InvalidParam {
            param: "from",
            message: format!(
                "{} is after the report's end ({})",
                rfc3339(params.from.unwrap_or(to)),
                rfc3339(to)
            ),
        });
    }
    let mut query = ResultsQuery::new(
        app.id(),
        experiment,
        params.from,
        to,
        &params.metrics,
        &settings.currency,
        settings.exchange_rates.clone(),
    );
    if let Some(method) = params.method {
        query = query.with_method(method);
    }
    if catalog.reports_store_revenue(app.id()) {
        query = query.with_store_metrics(params.horizon_days.unwrap_or(settings.horizon_days));
    }
    let data = source
        .experiment_results(&query)
        .await
        .map_err(ReportError::Store)?;
    Ok(report(app.id(), experiment, &query, &data))
}

impl ReportError {
    /// Whether the store ran past `experiments.query_timeout_ms` (or found no connection in
    /// time): narrowing the window may help.
    pub fn timed_out(&self) -> bool {
        matches!(
            self,
            ReportError::Store(StoreError::Unavailable {
                reason: Outage::Timeout,
                ..
            })
        )
    }
}

/// The experiments of the catalog, of app `app` (its id as given) only when given, with their
/// exposed users.
pub async fn experiment_list<'c>(
    catalog: &'c Catalog,
    source: &dyn ResultsSource,
    app: Option<&str>,
) -> Result<(Vec<Listed<'c>>, BTreeMap<ExperimentId, u64>), ReportError> {
    let app = app
        .map(|text| {
            let id: AppId = text.parse().map_err(|_| ReportError::InvalidParam {
                param: "app_id",
                message: format!("{text:?} is not a UUID in its hyphenated form"),
            })?;
            catalog
                .app(id)
                .map(|a| a.id())
                .ok_or_else(|| ReportError::UnknownApp(text.to_owned()))
        })
        .transpose()?;
    let listed = experiments(catalog, app);
    let mut apps: Vec<AppId> = listed.iter().map(|l| l.app.id()).collect();
    apps.dedup();
    let mut exposed = BTreeMap::new();
    // Counted as a report without a window counts `exposed_users`: up to now, exposures to
    // the experiment's own variants, users of two variants left out (D22).
    let to = OffsetDateTime::now_utc();
    for app in apps {
        let query = ExposureCountQuery {
            app_id: app,
            experiments: listed
                .iter()
                .filter(|l| l.app.id() == app)
                .map(|l| {
                    let variants = l.experiment.variants().iter().map(|v| v.id()).collect();
                    (l.experiment.id(), variants)
                })
                .collect(),
            to,
        };
        exposed.extend(
            source
                .exposure_counts(&query)
                .await
                .map_err(ReportError::Store)?,
        );
    }
    Ok((listed, exposed))
}

/// An experiment of the catalog, with where it is.
pub struct Listed<'c> {
    /// Its app.
    pub app: &'c App,
    /// The placement whose rule holds it.
    pub placement: &'c str,
    /// The experiment.
    pub experiment: &'c Experiment,
}

/// The experiments of the catalog (of `app` only, when given), ordered by app name, app id,
/// placement key.
pub fn experiments(catalog: &Catalog, app: Option<AppId>) -> Vec<Listed<'_>> {
    let mut apps: Vec<&App> = catalog
        .workspaces()
        .flat_map(|w| w.app_ids().iter().filter_map(|id| catalog.app(*id)))
        .filter(|a| app.is_none_or(|id| a.id() == id))
        .collect();
    apps.sort_by(|a, b| (&a.name(), a.id()).cmp(&(&b.name(), b.id())));
    apps.into_iter()
        .flat_map(|app| {
            app.experiments()
                .into_iter()
                .map(move |(placement, experiment)| Listed {
                    app,
                    placement,
                    experiment,
                })
        })
        .collect()
}
