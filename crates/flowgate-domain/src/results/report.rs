//! From the store's counts to the report (D22): variants in the catalog's order, each metric
//! compared with the control, the sample ratio check, the warnings, the cumulative daily series.

use std::collections::BTreeMap;

use time::{Date, OffsetDateTime};

use super::sequential::{compare_sequential, Method, SequentialConfig};
use super::stats::{compare, srm_p_value, Estimate, MetricKind, NoEstimate, VariantSums};
use super::verdict::Decision;
use crate::catalog::PROCEEDS_METRIC;
use crate::catalog::{AnalysisSettings, Experiment, ExperimentStatus};
use crate::events::EventType;
use crate::ids::{AppId, ExperimentId, VariantId};

/// The metric name of revenue per user.
pub const REVENUE_METRIC: &str = "revenue";
/// The store conversions (D30), in report order, with their counts.
type StoreCount = fn(&StoreCounts) -> u64;
const STORE_CONVERSIONS: [(&str, StoreCount); 4] = [
    ("trial_started", |c| c.trial_started),
    ("trial_converted", |c| c.trial_converted),
    ("paid", |c| c.paid),
    ("refunded", |c| c.refunded),
];

/// Below this sample-ratio p-value the report warns (D22).
pub const SRM_WARNING_P_VALUE: f64 = 0.001;
/// Above this share of multiple exposures among exposed users the report warns (D22).
pub const MULTIPLE_EXPOSURE_WARNING_SHARE: f64 = 0.01;

/// What the store is asked to aggregate for one experiment.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ResultsQuery {
    /// The experiment's app: its events are the ones read.
    pub app_id: AppId,
    /// The experiment.
    pub experiment_id: ExperimentId,
    /// Its variants, in the catalog's order.
    pub variants: Vec<VariantId>,
    /// The users first exposed from this instant on (inclusive); `None`: every user first
    /// exposed up to `to`.
    pub from: Option<OffsetDateTime>,
    /// Exposures and outcomes up to this instant (inclusive).
    pub to: OffsetDateTime,
    /// The conversion metrics, in report order: `flow_complete`, `purchase_complete`, then the
    /// ones asked for.
    pub conversions: Vec<EventType>,
    /// The reporting currency (three upper-case letters).
    pub currency: String,
    /// `EUR = 1.08`: 1 EUR is 1.08 of the reporting currency. The reporting currency itself is
    /// 1 whether listed or not.
    pub exchange_rates: BTreeMap<String, f64>,
    /// How the comparisons are tested (D27): the experiment's `analysis.sequential` unless
    /// [`ResultsQuery::with_method`] overrides it. The store does not read it.
    pub method: Method,
    /// The store metrics (D30) of transactions bought within this many days of a user's first
    /// exposure; `None` (the default): not reported. See [`ResultsQuery::with_store_metrics`].
    pub store_horizon_days: Option<u32>,
}

impl ResultsQuery {
    /// The query for `experiment` of `app`: its variants, the default conversions, then its
    /// analysis metrics that are event types (D27), then `extra` ones (repeats dropped),
    /// between `from` and `to`, in `currency`, tested by the experiment's method.
    pub fn new(
        app_id: AppId,
        experiment: &Experiment,
        from: Option<OffsetDateTime>,
        to: OffsetDateTime,
        extra: &[EventType],
        currency: &str,
        exchange_rates: BTreeMap<String, f64>,
    ) -> Self {
        let mut conversions = vec![EventType::FlowComplete, EventType::PurchaseComplete];
        let analysis = experiment.analysis.conversion_metrics();
        for metric in analysis.iter().chain(extra) {
            if !conversions.contains(metric) {
                conversions.push(*metric);
            }
        }
        Self {
            app_id,
            experiment_id: experiment.id,
            variants: experiment.variants.iter().map(|v| v.id).collect(),
            from,
            to,
            conversions,
            currency: currency.to_owned(),
            exchange_rates,
            store_horizon_days: None,
            method: if experiment.analysis.sequential {
                Method::Sequential(SequentialConfig::default())
            } else {
                Method::FixedHorizon
            },
        }
    }

    /// The same query with the store metrics (D30) of transactions bought within
    /// `horizon_days` of first exposure.
    pub fn with_store_metrics(mut self, horizon_days: u32) -> Self {
        self.store_horizon_days = Some(horizon_days);
        self
    }

    /// The same query tested by `method` (`--method`, `method=`: D27).
    pub fn with_method(mut self, method: Method) -> Self {
        self.method = method;
        self
    }

    /// What one unit of `currency` is worth in the reporting currency, if known.
    pub fn rate(&self, currency: &str) -> Option<f64> {
        if currency == self.currency {
            Some(1.0)
        } else {
            self.exchange_rates.get(currency).copied()
        }
    }
}

/// What the store aggregated (the [`ResultsSource`](crate::ports::ResultsSource) port's answer).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResultsData {
    /// Per variant of the query (in any order; a variant without users may be missing).
    pub variants: Vec<VariantCounts>,
    /// Users exposed to two or more variants, left out of every figure.
    pub multiple_exposures: u64,
    /// Purchases of counted users in a currency without an exchange rate, left out of revenue.
    pub unconverted_purchases: u64,
    /// The first counted exposure in the window.
    pub first_exposure: Option<OffsetDateTime>,
    /// Per UTC day and variant, what started that day (not cumulative).
    pub daily: Vec<DailyCounts>,
}

/// One variant's counts.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct VariantCounts {
    /// The variant.
    pub variant_id: VariantId,
    /// Users exposed to this variant only.
    pub users: u64,
    /// Users who converted, per conversion metric of the query, in its order.
    pub conversions: Vec<u64>,
    /// Revenue per user: the users, the sum and the sum of squares of each user's converted
    /// revenue.
    pub revenue: VariantSums,
    /// The store metrics (D30), when the query asks for them.
    pub store: StoreCounts,
}

/// One variant's store metrics (D30): users with each, and proceeds per user.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct StoreCounts {
    /// Users who started a free trial.
    pub trial_started: u64,
    /// Users whose trial converted to a paid transaction.
    pub trial_converted: u64,
    /// Users with a paid transaction.
    pub paid: u64,
    /// Users with a paid transaction refunded.
    pub refunded: u64,
    /// Proceeds per user in the reporting currency: the users, the sum, the sum of squares.
    pub proceeds: VariantSums,
}

impl VariantCounts {
    /// Counts of `variant_id`.
    pub fn new(
        variant_id: VariantId,
        users: u64,
        conversions: Vec<u64>,
        revenue: VariantSums,
    ) -> Self {
        Self {
            variant_id,
            users,
            conversions,
            revenue,
            store: StoreCounts::default(),
        }
    }
}

/// What started on one UTC day for one variant.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct DailyCounts {
    /// The day (UTC).
    pub date: Date,
    /// The variant.
    pub variant_id: VariantId,
    /// Users first exposed that day.
    pub users: u64,
    /// Users whose first qualifying conversion was that day, per conversion metric.
    pub conversions: Vec<u64>,
}

impl DailyCounts {
    /// The counts of `variant_id` on `date`.
    pub fn new(date: Date, variant_id: VariantId, users: u64, conversions: Vec<u64>) -> Self {
        Self {
            date,
            variant_id,
            users,
            conversions,
        }
    }
}

/// The report of one experiment (D22).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ExperimentReport {
    /// The experiment.
    pub experiment_id: ExperimentId,
    /// Its name.
    pub name: String,
    /// Its app.
    pub app_id: AppId,
    /// Its status.
    pub status: ExperimentStatus,
    /// The window's start: the query's, or the first exposure, or `to` when none.
    pub from: OffsetDateTime,
    /// The window's end.
    pub to: OffsetDateTime,
    /// The reporting currency.
    pub currency: String,
    /// Users exposed to exactly one variant.
    pub exposed_users: u64,
    /// Users exposed to two or more variants (left out).
    pub multiple_exposures: u64,
    /// Purchases left out of revenue for want of an exchange rate.
    pub unconverted_purchases: u64,
    /// The sample ratio mismatch check's p-value.
    pub srm_p_value: f64,
    /// What makes the figures doubtful, in words.
    pub warnings: Vec<Warning>,
    /// The variants, in the catalog's order.
    pub variants: Vec<VariantRow>,
    /// Each metric: the conversions, then revenue.
    pub metrics: Vec<MetricReport>,
    /// Cumulative per day and variant.
    pub daily: Vec<DailyRow>,
    /// How the comparisons' intervals and p-values were computed (D27).
    pub method: Method,
    /// The experiment's analysis settings the decision read (D27).
    pub analysis: AnalysisSettings,
    /// What to do, by D27's rules under the experiment's analysis settings.
    pub decision: Decision,
}

/// A warning: a stable code and a sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// `srm`, `multiple_exposures`, `unconverted_purchases` or `overflow`.
    pub code: &'static str,
    /// What it means, with the figures.
    pub message: String,
}

/// A variant of the report.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct VariantRow {
    /// Id.
    pub variant_id: VariantId,
    /// Name.
    pub name: String,
    /// Normalised weight.
    pub weight: f64,
    /// Exposed users.
    pub users: u64,
}

/// One metric across the variants.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct MetricReport {
    /// The event type of a conversion, or `revenue`.
    pub metric: String,
    /// Conversion or mean.
    pub kind: MetricKind,
    /// Per variant, the control first.
    pub variants: Vec<MetricVariant>,
}

/// One variant's figures of one metric.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct MetricVariant {
    /// The variant.
    pub variant_id: VariantId,
    /// Users, sum, sum of squares.
    pub sums: VariantSums,
    /// The mean per user (the conversion rate of a conversion).
    pub mean: f64,
    /// Against the control: `None` for the control itself.
    pub comparison: Option<Result<Estimate, NoEstimate>>,
}

impl MetricVariant {
    /// Why this variant's figures are missing, if they are: its own sums overflowed
    /// ([`VariantSums::computable`], the control included), or else its comparison with the
    /// control has no estimate. `None` when every figure is given.
    pub fn reason(&self, kind: MetricKind) -> Option<NoEstimate> {
        match (self.sums.computable(kind), self.comparison) {
            (Err(no), _) | (Ok(()), Some(Err(no))) => Some(no),
            (Ok(()), _) => None,
        }
    }
}

/// One day of one variant, cumulative.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct DailyRow {
    /// The day (UTC).
    pub date: Date,
    /// The variant.
    pub variant_id: VariantId,
    /// Users exposed up to and including that day.
    pub users: u64,
    /// Users converted up to and including that day, per conversion metric (by event type).
    pub conversions: Vec<(EventType, u64)>,
}

/// The report of `experiment` (of app `app_id`) from what the store aggregated for `query`,
/// its decision still pending ([`super::report`] decides it).
pub(super) fn assemble(
    app_id: AppId,
    experiment: &Experiment,
    query: &ResultsQuery,
    data: &ResultsData,
) -> ExperimentReport {
    let variants = variant_rows(experiment, data);
    let users: Vec<u64> = variants.iter().map(|v| v.users).collect();
    let weights: Vec<f64> = variants.iter().map(|v| v.weight).collect();
    let exposed_users: u64 = users.iter().sum();
    let srm = srm_p_value(&users, &weights);

    let mut metrics = Vec::with_capacity(query.conversions.len() + 1);
    conversion_metrics(&variants, query, data, &mut metrics);
    metrics.push(revenue_metric(&variants, query, data));
    if query.store_horizon_days.is_some() {
        store_metrics(&variants, query, data, &mut metrics);
    }

    let mut warnings = Vec::new();
    warnings.extend(srm_warning(srm, &users, &weights));
    warnings.extend(multiple_exposures_warning(exposed_users, data));
    warnings.extend(unconverted_purchases_warning(query, data));
    warnings.extend(overflow_warnings(&metrics, &variants));

    let from = query
        .from
        .or(data.first_exposure)
        .unwrap_or(query.to)
        .min(query.to);
    ExperimentReport {
        experiment_id: experiment.id,
        name: experiment.name.clone(),
        app_id,
        status: experiment.status,
        from,
        to: query.to,
        currency: query.currency.clone(),
        exposed_users,
        multiple_exposures: data.multiple_exposures,
        unconverted_purchases: data.unconverted_purchases,
        srm_p_value: srm,
        warnings,
        daily: daily(&variants, query, data),
        variants,
        metrics,
        method: query.method,
        analysis: experiment.analysis.clone(),
        decision: Decision::pending(),
    }
}

/// What the store counted for variant `id`, if it counted anything.
fn counts(data: &ResultsData, id: VariantId) -> Option<&VariantCounts> {
    data.variants.iter().find(|v| v.variant_id == id)
}

/// One row per variant of the experiment, in the catalog's order, with its exposed users.
fn variant_rows(experiment: &Experiment, data: &ResultsData) -> Vec<VariantRow> {
    experiment
        .variants
        .iter()
        .map(|v| VariantRow {
            variant_id: v.id,
            name: v.name.clone(),
            weight: v.weight,
            users: counts(data, v.id).map_or(0, |c| c.users),
        })
        .collect()
}

/// One conversion metric per event type of the query, in its order, pushed onto `metrics`.
fn conversion_metrics(
    variants: &[VariantRow],
    query: &ResultsQuery,
    data: &ResultsData,
    metrics: &mut Vec<MetricReport>,
) {
    for (i, event) in query.conversions.iter().enumerate() {
        let sums: Vec<(VariantId, VariantSums)> = variants
            .iter()
            .map(|v| {
                let converted = counts(data, v.variant_id)
                    .and_then(|c| c.conversions.get(i).copied())
                    .unwrap_or(0) as f64;
                let sums = VariantSums {
                    users: v.users,
                    sum: converted,
                    sum_squares: converted,
                };
                (v.variant_id, sums)
            })
            .collect();
        metrics.push(metric(
            event.as_str(),
            MetricKind::Conversion,
            &sums,
            query.method,
        ));
    }
}

/// The revenue metric, a mean per exposed user.
fn revenue_metric(
    variants: &[VariantRow],
    query: &ResultsQuery,
    data: &ResultsData,
) -> MetricReport {
    let revenue: Vec<(VariantId, VariantSums)> = variants
        .iter()
        .map(|v| {
            let sums = counts(data, v.variant_id).map_or(
                VariantSums {
                    users: v.users,
                    ..VariantSums::default()
                },
                |c| c.revenue,
            );
            (v.variant_id, sums)
        })
        .collect();
    metric(REVENUE_METRIC, MetricKind::Mean, &revenue, query.method)
}

/// The store's metrics, for a query with a store horizon: its conversions, then its proceeds,
/// pushed onto `metrics`.
fn store_metrics(
    variants: &[VariantRow],
    query: &ResultsQuery,
    data: &ResultsData,
    metrics: &mut Vec<MetricReport>,
) {
    let store =
        |v: &VariantRow| counts(data, v.variant_id).map_or_else(StoreCounts::default, |c| c.store);
    for (name, count) in STORE_CONVERSIONS {
        let sums: Vec<(VariantId, VariantSums)> = variants
            .iter()
            .map(|v| {
                let n = count(&store(v)) as f64;
                let sums = VariantSums {
                    users: v.users,
                    sum: n,
                    sum_squares: n,
                };
                (v.variant_id, sums)
            })
            .collect();
        metrics.push(metric(name, MetricKind::Conversion, &sums, query.method));
    }
    let proceeds: Vec<(VariantId, VariantSums)> = variants
        .iter()
        .map(|v| {
            let mut sums = store(v).proceeds;
            sums.users = v.users;
            (v.variant_id, sums)
        })
        .collect();
    metrics.push(metric(
        PROCEEDS_METRIC,
        MetricKind::Mean,
        &proceeds,
        query.method,
    ));
}

/// The `srm` warning when the exposed users per variant are unlikely under the weights.
fn srm_warning(srm: f64, users: &[u64], weights: &[f64]) -> Option<Warning> {
    (srm < SRM_WARNING_P_VALUE).then(|| Warning {
        code: "srm",
        message: format!(
            "sample ratio mismatch: the exposed users per variant ({}) are unlikely under the \
             weights ({}) (p = {srm:.2e}); assignment or exposure tracking is broken \
             somewhere, so do not trust the comparison",
            join(users),
            weights
                .iter()
                .map(|w| format!("{w:.3}"))
                .collect::<Vec<_>>()
                .join(" / "),
        ),
    })
}

/// The `multiple_exposures` warning when more than the tolerated share of the exposed users
/// saw more than one variant.
fn multiple_exposures_warning(exposed_users: u64, data: &ResultsData) -> Option<Warning> {
    let seen = exposed_users + data.multiple_exposures;
    let too_many =
        seen > 0 && data.multiple_exposures as f64 / seen as f64 > MULTIPLE_EXPOSURE_WARNING_SHARE;
    too_many.then(|| Warning {
        code: "multiple_exposures",
        message: format!(
            "{} of {seen} exposed users ({:.1}%) saw more than one variant and are left out; \
             above 1% the variants no longer compare like with like (a reweighting, or \
             users identified differently across devices)",
            data.multiple_exposures,
            100.0 * data.multiple_exposures as f64 / seen as f64
        ),
    })
}

/// The `unconverted_purchases` warning when purchases were left out of revenue for want of
/// an exchange rate.
fn unconverted_purchases_warning(query: &ResultsQuery, data: &ResultsData) -> Option<Warning> {
    (data.unconverted_purchases > 0).then(|| Warning {
        code: "unconverted_purchases",
        message: format!(
            "{} purchases in currencies without an exchange rate to {} are left out of \
             revenue (set experiments.exchange_rates)",
            data.unconverted_purchases, query.currency
        ),
    })
}

/// One `overflow` warning per metric with variants whose figures cannot be computed, naming
/// them.
fn overflow_warnings(metrics: &[MetricReport], variants: &[VariantRow]) -> Vec<Warning> {
    let mut warnings = Vec::new();
    for m in metrics {
        let overflowed: Vec<&str> = m
            .variants
            .iter()
            .filter(|v| v.sums.computable(m.kind).is_err())
            .filter_map(|v| variants.iter().find(|r| r.variant_id == v.variant_id))
            .map(|r| r.name.as_str())
            .collect();
        if !overflowed.is_empty() {
            warnings.push(Warning {
                code: NoEstimate::Overflow.code(),
                message: format!(
                    "{}: the figures of {} cannot be computed: the sum of the users' values or \
                     of their squares is beyond a 64-bit float, so stored events hold values far \
                     outside an event's range (a revenue is at most 1000000 per event); those \
                     figures and every comparison with them are left out (reason `overflow`)",
                    m.metric,
                    overflowed.join(", "),
                ),
            });
        }
    }
    warnings
}

fn join(values: &[u64]) -> String {
    values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" / ")
}

/// One metric: the control first, each other variant compared with it by `method`. The chance
/// to win and the credible interval are Bayesian under either method (D22, D27); the sequential
/// test replaces the interval and the p-value.
fn metric(
    name: &str,
    kind: MetricKind,
    sums: &[(VariantId, VariantSums)],
    method: Method,
) -> MetricReport {
    let control = sums.first().map(|(_, s)| *s).unwrap_or_default();
    let variants = sums
        .iter()
        .enumerate()
        .map(|(i, (variant_id, s))| MetricVariant {
            variant_id: *variant_id,
            sums: *s,
            mean: s.mean(),
            comparison: (i > 0).then(|| {
                let estimate = compare(kind, &control, s)?;
                match method {
                    Method::FixedHorizon => Ok(estimate),
                    Method::Sequential(config) => {
                        let seq = compare_sequential(kind, &control, s, &config)?;
                        Ok(Estimate {
                            ci_low: seq.ci_low,
                            ci_high: seq.ci_high,
                            p_value: seq.p_value,
                            ..estimate
                        })
                    }
                }
            }),
        })
        .collect();
    MetricReport {
        metric: name.to_owned(),
        kind,
        variants,
    }
}

/// The cumulative series: every day from the first with data to the last, every variant.
fn daily(variants: &[VariantRow], query: &ResultsQuery, data: &ResultsData) -> Vec<DailyRow> {
    let Some(first) = data.daily.iter().map(|d| d.date).min() else {
        return Vec::new();
    };
    let last = data.daily.iter().map(|d| d.date).max().unwrap_or(first);
    let metrics = query.conversions.len();
    let mut by_day: BTreeMap<(Date, usize), (u64, Vec<u64>)> = BTreeMap::new();
    for d in &data.daily {
        let Some(v) = variants.iter().position(|v| v.variant_id == d.variant_id) else {
            continue;
        };
        let entry = by_day
            .entry((d.date, v))
            .or_insert_with(|| (0, vec![0; metrics]));
        entry.0 += d.users;
        for (total, n) in entry.1.iter_mut().zip(&d.conversions) {
            *total += n;
        }
    }
    let mut running: Vec<(u64, Vec<u64>)> = vec![(0, vec![0; metrics]); variants.len()];
    let mut rows = Vec::new();
    let mut day = first;
    loop {
        for (v, variant) in variants.iter().enumerate() {
            if let Some((users, conversions)) = by_day.get(&(day, v)) {
                running[v].0 += users;
                for (total, n) in running[v].1.iter_mut().zip(conversions) {
                    *total += n;
                }
            }
            rows.push(DailyRow {
                date: day,
                variant_id: variant.variant_id,
                users: running[v].0,
                conversions: query
                    .conversions
                    .iter()
                    .copied()
                    .zip(running[v].1.iter().copied())
                    .collect(),
            });
        }
        match day.next_day() {
            Some(next) if next <= last => day = next,
            _ => return rows,
        }
    }
}
