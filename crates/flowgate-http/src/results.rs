//! Experiment results for operators (D22): the list of experiments and the report of one, made
//! the same way for every caller (the command line, the admin API, the console): the catalog
//! names the experiment, the store's [`ResultsSource`] aggregates its events, the domain's
//! [`report`] computes the figures, and [`report_json`] writes D22's JSON.

use flowgate_domain::text::rfc3339;
use std::collections::BTreeMap;

use flowgate_domain::catalog::{App, Experiment};
use flowgate_domain::events::EventType;
use flowgate_domain::ids::{AppId, ExperimentId};
use flowgate_domain::ports::{Outage, ResultsSource, StoreError};
use flowgate_domain::results::{
    report, Decision, ExperimentReport, ExposureCountQuery, Method, MetricReport, ResultsQuery,
    SequentialConfig, Verdict,
};
use flowgate_domain::Catalog;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use serde_json::{json, Value};
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

/// The list as JSON: `{"experiments": [...]}`, each with its app, placement, status, schedule
/// (`starts_at`, `ends_at`: RFC 3339 or null, D29), variants
/// and, when known, its exposed users (every user with an exposure, multiple ones included).
pub fn experiments_json(listed: &[Listed<'_>], exposed: &BTreeMap<ExperimentId, u64>) -> Value {
    let items: Vec<Value> = listed
        .iter()
        .map(|l| {
            json!({
                "experiment_id": l.experiment.id().to_string(),
                "name": l.experiment.name(),
                "app_id": l.app.id().to_string(),
                "app_name": l.app.name(),
                "placement_key": l.placement,
                "status": l.experiment.status().as_str(),
                "starts_at": l.experiment.starts_at().map(rfc3339),
                "ends_at": l.experiment.ends_at().map(rfc3339),
                "exposed_users": exposed.get(&l.experiment.id()).copied().unwrap_or(0),
                "variants": l.experiment.variants().iter().map(|v| json!({
                    "variant_id": v.id().to_string(), "name": v.name(), "weight": v.weight(),
                    "holdout": v.flow().is_none(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "experiments": items })
}

/// A figure, `null` when not a finite number.
fn figure(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// D22's JSON of a report (stable; changes are additions only).
pub fn report_json(r: &ExperimentReport) -> Value {
    let metrics: Vec<Value> = r
        .metrics
        .iter()
        .map(|m| {
            let variants: Vec<Value> = m
                .variants
                .iter()
                .map(|v| {
                    let estimate = match &v.comparison {
                        Some(Ok(e)) => Some(e),
                        None | Some(Err(_)) => None,
                    };
                    // A figure that is `null` says why: the comparison's reason, or
                    // `overflow` for sums that left the float range (the control's too).
                    let reason = v.reason(m.kind).map(|no| no.code());
                    let field = |f: fn(&flowgate_domain::results::Estimate) -> f64| {
                        estimate.map_or(Value::Null, |e| figure(f(e)))
                    };
                    json!({
                        "variant_id": v.variant_id.to_string(),
                        "users": v.sums.users,
                        "sum": figure(v.sums.sum),
                        "sum_squares": figure(v.sums.sum_squares),
                        "mean": figure(v.mean),
                        "lift": field(|e| e.lift),
                        "ci_low": field(|e| e.ci_low),
                        "ci_high": field(|e| e.ci_high),
                        "p_value": field(|e| e.p_value),
                        "chance_to_win": field(|e| e.chance_to_win),
                        "credible_low": field(|e| e.credible_low),
                        "credible_high": field(|e| e.credible_high),
                        "reason": reason,
                    })
                })
                .collect();
            json!({
                "metric": m.metric, "kind": m.kind.as_str(), "role": MetricRole::of(r, m).as_str(),
                "variants": variants,
            })
        })
        .collect();
    json!({
        "experiment_id": r.experiment_id.to_string(),
        "name": r.name,
        "app_id": r.app_id.to_string(),
        "status": r.status.as_str(),
        "from": rfc3339(r.from),
        "to": rfc3339(r.to),
        "currency": r.currency,
        "exposed_users": r.exposed_users,
        "multiple_exposures": r.multiple_exposures,
        "unconverted_purchases": r.unconverted_purchases,
        "srm_p_value": figure(r.srm_p_value),
        "warnings": r.warnings.iter().map(|w| json!({"code": w.code, "message": w.message})).collect::<Vec<_>>(),
        "variants": r.variants.iter().map(|v| json!({
            "variant_id": v.variant_id.to_string(), "name": v.name, "weight": v.weight, "users": v.users,
        })).collect::<Vec<_>>(),
        "metrics": metrics,
        "method": r.method.as_str(),
        "analysis": {
            "primary_metric": r.analysis.primary_metric,
            "guardrail_metrics": r.analysis.guardrail_metrics,
            "sequential": r.analysis.sequential,
            "minimum_users": r.analysis.minimum_users,
        },
        "decision": decision_json(&r.decision),
        "daily": r.daily.iter().map(|d| json!({
            "date": d.date.to_string(),
            "variant_id": d.variant_id.to_string(),
            "users": d.users,
            "conversions": d.conversions.iter().map(|(t, n)| (t.as_str().to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
        })).collect::<Vec<_>>(),
    })
}

/// The verdict in words (D27), as the CLI's first line and the console's heading say it:
/// "Ship new", "Roll back to control", "Keep running", "No decision".
pub fn verdict_words(r: &ExperimentReport) -> String {
    let name = |id: Option<flowgate_domain::ids::VariantId>| {
        id.and_then(|id| r.variants.iter().find(|v| v.variant_id == id))
            .map(|v| v.name.clone())
    };
    match r.decision.verdict {
        Verdict::Ship => format!(
            "Ship {}",
            name(r.decision.variant_id).unwrap_or_else(|| "the treatment".to_owned())
        ),
        Verdict::RollBack => format!(
            "Roll back to {}",
            r.variants
                .first()
                .map_or_else(|| "the control".to_owned(), |v| v.name.clone())
        ),
        Verdict::KeepRunning => "Keep running".to_owned(),
        _ => "No decision".to_owned(),
    }
}

/// A metric's part in the decision (D27).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricRole {
    /// The metric that decides.
    Primary,
    /// A metric that must not get worse.
    Guardrail,
    /// Reported, not read by the decision.
    Other,
}

impl MetricRole {
    /// The part of `m` in the decision of `r`.
    pub fn of(r: &ExperimentReport, m: &MetricReport) -> Self {
        if m.metric == r.analysis.primary_metric {
            MetricRole::Primary
        } else if r.analysis.guardrail_metrics.contains(&m.metric) {
            MetricRole::Guardrail
        } else {
            MetricRole::Other
        }
    }

    /// `primary`, `guardrail` or `other`.
    pub const fn as_str(self) -> &'static str {
        match self {
            MetricRole::Primary => "primary",
            MetricRole::Guardrail => "guardrail",
            MetricRole::Other => "other",
        }
    }
}

/// The report's metrics in the order people read them (D27): the primary metric, the
/// guardrails in their order, then the others in the report's.
pub fn metrics_by_role(r: &ExperimentReport) -> Vec<(&MetricReport, MetricRole)> {
    let role = |m: &MetricReport| MetricRole::of(r, m);
    let rank = |m: &MetricReport| match role(m) {
        MetricRole::Primary => 0,
        MetricRole::Guardrail => {
            1 + r
                .analysis
                .guardrail_metrics
                .iter()
                .position(|g| *g == m.metric)
                .unwrap_or(0)
        }
        MetricRole::Other => usize::MAX,
    };
    let mut metrics: Vec<(&MetricReport, MetricRole)> =
        r.metrics.iter().map(|m| (m, role(m))).collect();
    // Stable: the others keep the report's order.
    metrics.sort_by_key(|(m, _)| rank(m));
    metrics
}

/// D27's decision: `{"verdict", "variant_id", "reasons": [{"code", "message", "metric",
/// "variant_id"}]}`.
pub fn decision_json(d: &Decision) -> Value {
    json!({
        "verdict": d.verdict.as_str(),
        "variant_id": d.variant_id.map(|id| id.to_string()),
        "reasons": d.reasons.iter().map(|r| json!({
            "code": r.code,
            "message": r.message,
            "metric": r.metric,
            "variant_id": r.variant_id.map(|id| id.to_string()),
        })).collect::<Vec<_>>(),
    })
}

/// Report queries' metrics (`flowgate_results_*`): their count by outcome and their duration.
#[derive(Clone, Debug)]
pub struct ResultsMetrics {
    queries: Family<OutcomeLabels, Counter>,
    duration: Histogram,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

impl ResultsMetrics {
    /// New metrics, registered in `registry` under the `flowgate_results` prefix.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            queries: Family::default(),
            // 10 ms doubling to about 80 s.
            duration: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
        };
        let r = registry.sub_registry_with_prefix("flowgate_results");
        r.register(
            "queries",
            "Experiment results read (a report or a list's exposed users), by outcome: ok, timeout (past experiments.query_timeout_ms) or error",
            m.queries.clone(),
        );
        r.register_with_unit(
            "query_duration",
            "Time to read an experiment's results or a list's exposed users, whatever the outcome",
            Unit::Seconds,
            m.duration.clone(),
        );
        m
    }

    /// Counts one read that took `took` and ended in `result`.
    pub fn observe<T>(&self, took: std::time::Duration, result: &Result<T, ReportError>) {
        let outcome = match result {
            Ok(_) => "ok",
            Err(e) if e.timed_out() => "timeout",
            Err(ReportError::Store(_)) => "error",
            // The request's own mistakes read nothing.
            Err(_) => return,
        };
        self.queries.get_or_create(&OutcomeLabels { outcome }).inc();
        self.duration.observe(took.as_secs_f64());
    }
}
