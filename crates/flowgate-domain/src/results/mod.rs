//! Experiment results (D22): which variant wins, from the stored events.
//!
//! Two steps, both behind the same calls for every caller (the command line, the admin API,
//! the console): the store aggregates the events of an experiment into [`ResultsData`] (the
//! [`ResultsSource`](crate::ports::ResultsSource) port, asked with a [`ResultsQuery`]), and
//! [`report`] turns those counts into an [`ExperimentReport`] with the statistics of
//! [`stats`], which are GrowthBook's (gbstats 0.8.0): the intervals and p-values of gbstats'
//! sequential test ([`sequential`], valid at any number of looks) or of its fixed-horizon one,
//! as the experiment's analysis settings or the query's [`Method`] say (D27). The report ends
//! with D27's [`Decision`], read by [`decide`]: ship, roll back, keep running or no decision.
//! Ratio metrics and CUPED (D36) are [`statistic`]'s, the same tests on gbstats' other
//! statistics.
//!
//! What is counted (D22):
//! - **Exposure**: a user's `flow_open` event carrying the experiment's id and one of its
//!   variants' ids, or for a variant that shows no flow the server's `resolve_no_flow` event of
//!   reason `holdout` with those ids; the user's first one (up to the report's end) starts
//!   their observation. A user exposed to two or more variants (up to the end) is left out of
//!   every figure and counted in `multiple_exposures`.
//! - **Conversions**: the users with at least one event of the type (of the experiment's app,
//!   joined by `user_id`) at or after their first exposure, up to the report's end.
//! - **Revenue**: per user, the sum of `revenue` of their `purchase_complete` events in that
//!   span, converted into the reporting currency by the exchange rates; 0 for users who bought
//!   nothing. A purchase in a currency without a rate is left out and counted in
//!   `unconverted_purchases`, never guessed.
//! - **Window**: the report's users are those whose first exposure is in it, both ends
//!   inclusive (`from <= first exposure <= to`; without `from`, every user first exposed up to
//!   `to`), and their outcomes count up to `to` inclusive: a cohort by first exposure, so a
//!   window never cuts a user's history in two.
//! - **Daily**: per UTC day and variant, the users first exposed that day and the users whose
//!   first qualifying conversion fell that day; the report accumulates them.

mod aggregate;
pub mod bandit;
pub mod correction;
mod decision;
mod report;
pub mod sequential;
pub mod statistic;
pub mod stats;
mod verdict;

pub use crate::catalog::AnalysisSettings;
pub use crate::catalog::{PROCEEDS_METRIC, STORE_METRICS};
pub use aggregate::{
    aggregate, aggregate_with, exposure_counts, Exposure, ExposureCountQuery, Folder, Outcome,
};
pub use decision::{decide, relative_percent};
pub use report::{
    DailyCounts, DailyRow, ExperimentReport, MetricReport, MetricVariant, ResultsData,
    ResultsQuery, StoreCounts, VariantCounts, VariantRow, Warning, MULTIPLE_EXPOSURE_WARNING_SHARE,
    REVENUE_METRIC, SRM_WARNING_P_VALUE,
};
pub use sequential::{
    compare_sequential, FrequentistEstimate, Method, SequentialConfig, DEFAULT_TUNING,
};
pub use stats::{
    compare, fisher_exact, srm_p_value, Estimate, MetricKind, NoEstimate, VariantSums,
};
pub use verdict::{Decision, Reason, Verdict};

/// The report of `experiment` (of app `app_id`) from what the store aggregated for `query`,
/// with its decision (D27: [`decide`] under the experiment's analysis settings).
pub fn report(
    app_id: crate::ids::AppId,
    experiment: &crate::catalog::Experiment,
    query: &ResultsQuery,
    data: &ResultsData,
) -> ExperimentReport {
    let mut assembled = report::assemble(app_id, experiment, query, data);
    assembled.decision = decide(&assembled, &experiment.analysis);
    assembled
}
