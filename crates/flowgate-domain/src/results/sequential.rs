//! The sequential test of experiment results (D27): gbstats 0.8.0's `SequentialTwoSidedTTest`,
//! an asymptotic confidence sequence (Waudby-Smith et al., "Time-uniform central limit theory
//! and asymptotic confidence sequences", 2023). Its interval and p-value stay valid however
//! often the report is read, where the fixed-horizon test's ([`compare`](super::compare)) hold
//! for one look only. Golden vectors generated with gbstats itself are the tests
//! (`tests/data/gbstats/sequential.json`).
//!
//! The lift and its variance are the fixed-horizon test's (relative lift, delta method). With
//! `N` the users of both variants, `s² = N·variance`, and the tuning parameter `ρ` of `alpha`
//! and `sequential_tuning_parameter` `T`:
//!
//! - `ρ² = (-2 ln α + ln(1 - 2 ln α)) / T`;
//! - interval: `lift ± √(s²) · √(2 (Nρ² + 1) ln(√(Nρ² + 1) / α) / (Nρ)²)`;
//! - p-value: `min(1, 1 / e)` of the e-value `e = exp(ρ² · (N lift² / variance) / (2 (Nρ² + 1)))
//!   / √(Nρ² + 1)`.

use super::stats::{MetricKind, NoEstimate, VariantSums, ALPHA};

/// gbstats' default `sequential_tuning_parameter`: the number of users (both variants) around
/// which the confidence sequence is tightest.
pub const DEFAULT_TUNING: f64 = 5000.0;

/// How a report's comparisons are tested (D27).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Method {
    /// gbstats' `TwoSidedTTest`: valid for one look at a horizon fixed in advance.
    FixedHorizon,
    /// gbstats' `SequentialTwoSidedTTest`: valid at any number of looks.
    Sequential(SequentialConfig),
}

impl Method {
    /// `fixed_horizon` or `sequential`, the report's `method` (D27).
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::FixedHorizon => "fixed_horizon",
            Method::Sequential(_) => "sequential",
        }
    }
}

/// The sequential test's parameters: gbstats' `sequential_tuning_parameter` and `alpha`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SequentialConfig {
    tuning: f64,
    alpha: f64,
}

impl Default for SequentialConfig {
    /// gbstats' defaults: tuning parameter 5000, alpha 0.05.
    fn default() -> Self {
        SequentialConfig {
            tuning: DEFAULT_TUNING,
            alpha: ALPHA,
        }
    }
}

impl SequentialConfig {
    /// `None` unless `tuning` is a positive finite number and `alpha` is strictly between 0
    /// and 1 (the formulas have no meaning otherwise).
    pub fn new(tuning: f64, alpha: f64) -> Option<Self> {
        (tuning.is_finite() && tuning > 0.0 && alpha > 0.0 && alpha < 1.0)
            .then_some(SequentialConfig { tuning, alpha })
    }

    /// The tuning parameter (`sequential_tuning_parameter`).
    pub const fn tuning(&self) -> f64 {
        self.tuning
    }

    /// `alpha`: the interval covers with probability `1 - alpha` at every look.
    pub const fn alpha(&self) -> f64 {
        self.alpha
    }

    /// `ρ²`, from `alpha` and the tuning parameter (eq. 161 of the paper, as gbstats has it).
    fn rho_squared(&self) -> f64 {
        let log_alpha = self.alpha.ln();
        (-2.0 * log_alpha + (1.0 - 2.0 * log_alpha).ln()) / self.tuning
    }
}

/// A variant compared with the control by a frequentist test alone: the relative lift, its
/// interval and the p-value of "no difference".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrequentistEstimate {
    /// `(mean_b - mean_a) / mean_a`.
    pub lift: f64,
    /// The interval of the lift (`1 - alpha` confidence, at every look for the sequential
    /// test).
    pub ci_low: f64,
    /// See `ci_low`.
    pub ci_high: f64,
    /// Two-sided p-value of "no difference".
    pub p_value: f64,
}

/// Compares `treatment` with `control` for a metric of `kind` with gbstats'
/// `SequentialTwoSidedTTest` under `config`. There is no estimate in the same cases, with the
/// same reasons, as the fixed-horizon [`compare`](super::compare): a variant without users is
/// [`NoEstimate::NoUsers`] where gbstats' t-test says `ZERO_NEGATIVE_VARIANCE` (its variance is
/// 0), so both methods give a report the same reason.
pub fn compare_sequential(
    kind: MetricKind,
    control: &VariantSums,
    treatment: &VariantSums,
    config: &SequentialConfig,
) -> Result<FrequentistEstimate, NoEstimate> {
    // The lift and its variance as in the fixed-horizon test.
    let super::stats::Lift { lift, variance, .. } =
        super::stats::relative_lift(kind, control, treatment)?;
    if !(variance.is_finite() && variance > 0.0) {
        return Err(NoEstimate::Overflow);
    }
    let n = (control.users + treatment.users) as f64;
    let (p_value, width) = confidence_sequence(lift, variance, n, config);
    let estimate = FrequentistEstimate {
        lift,
        ci_low: lift - width,
        ci_high: lift + width,
        p_value,
    };
    let figures = [estimate.lift, estimate.ci_low, estimate.ci_high, p_value];
    if figures.iter().all(|x| x.is_finite()) {
        Ok(estimate)
    } else {
        Err(NoEstimate::Overflow)
    }
}

/// gbstats' `SequentialTwoSidedTTest` from an effect, its variance and `n` the users of both
/// arms: the p-value and the half-width of the confidence sequence under `config`.
pub(crate) fn confidence_sequence(
    effect: f64,
    variance: f64,
    n: f64,
    config: &SequentialConfig,
) -> (f64, f64) {
    let rho2 = config.rho_squared();
    let n_rho2_1 = n * rho2 + 1.0;
    // The half-width of the confidence sequence (eq. 9 of the paper): √(s²) with s² = N·variance
    // the variance of one user's contribution, times the boundary's factor.
    let boundary = 2.0 * n_rho2_1 * (n_rho2_1.sqrt() / config.alpha).ln() / (n * n * rho2);
    let width = (variance * n).sqrt() * boundary.sqrt();
    // The p-value (eq. 155): the inverse of the e-value, at most 1. An e-value beyond the
    // float range is a p-value of 0, as in gbstats.
    let st2 = effect * effect * n / variance;
    let evalue = (rho2 * st2 / (2.0 * n_rho2_1)).exp() / n_rho2_1.sqrt();
    ((1.0 / evalue).min(1.0), width)
}

#[cfg(test)]
mod tests {
    use super::super::stats::tests::conv;
    use super::*;

    #[test]
    fn the_config_refuses_meaningless_parameters() {
        assert_eq!(
            SequentialConfig::new(5000.0, 0.05),
            Some(SequentialConfig::default())
        );
        for (tuning, alpha) in [
            (0.0, 0.05),
            (-1.0, 0.05),
            (f64::NAN, 0.05),
            (f64::INFINITY, 0.05),
        ] {
            assert_eq!(SequentialConfig::new(tuning, alpha), None, "{tuning}");
        }
        for alpha in [0.0, 1.0, -0.1, 1.5, f64::NAN] {
            assert_eq!(SequentialConfig::new(5000.0, alpha), None, "{alpha}");
        }
    }

    #[test]
    fn the_method_names_are_the_reports() {
        assert_eq!(Method::FixedHorizon.as_str(), "fixed_horizon");
        assert_eq!(
            Method::Sequential(SequentialConfig::default()).as_str(),
            "sequential"
        );
    }

    #[test]
    fn the_sequential_interval_is_wider_than_the_fixed_horizon_one() {
        let (a, b) = (conv(20_000, 2_000), conv(20_000, 2_150));
        let fixed = super::super::compare(MetricKind::Conversion, &a, &b).unwrap();
        let seq = compare_sequential(MetricKind::Conversion, &a, &b, &SequentialConfig::default())
            .unwrap();
        assert_eq!(seq.lift, fixed.lift);
        assert!(seq.ci_low < fixed.ci_low && seq.ci_high > fixed.ci_high);
        assert!(seq.p_value > fixed.p_value);
    }

    #[test]
    fn the_checks_are_the_fixed_horizon_tests() {
        let kind = MetricKind::Conversion;
        let config = SequentialConfig::default();
        for (a, b) in [
            (conv(100, 0), conv(0, 0)),
            (conv(100, 10), conv(0, 0)),
            (conv(100, 100), conv(100, 10)),
            (conv(1, 1), conv(1, 0)),
        ] {
            assert_eq!(
                compare_sequential(kind, &a, &b, &config).err(),
                super::super::compare(kind, &a, &b).err()
            );
        }
    }
}
