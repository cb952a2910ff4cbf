//! Ratio metrics and CUPED (D36), as GrowthBook's stats engine computes them: gbstats 0.8.0's
//! `RatioStatistic` and `RegressionAdjustedStatistic`, fed to its `TwoSidedTTest` or
//! `SequentialTwoSidedTTest` (the [`Method`] of the report) with the lift relative or absolute
//! ([`Difference`]). Golden vectors generated with gbstats itself are the tests
//! (`tests/data/cuped/`, README there).
//!
//! **Ratio metrics** ([`compare_ratio`]): a metric that is the ratio of two sums over the same
//! users, such as revenue per purchase. Per variant, [`RatioSums`] holds the users, each part's
//! sum and sum of squares, and the sum of the users' products of the two. With `m` and `d` the
//! means per user of the numerator and the denominator, `σ²` their variances (each as gbstats
//! computes it for its [`MetricKind`]) and `cov` their sample covariance, the variant's figure
//! is `m / d` and the variance of one user's contribution, by the delta method,
//! `σ²_m / d² - 2 cov · m / d³ + m² σ²_d / d⁴` (0 when `d` is 0 or with fewer than two users).
//!
//! **CUPED** ([`compare_cuped`]): regression adjustment with a pre-exposure covariate (D36: the
//! same metric over the lookback window before the user's first exposure, 0 for a user without
//! any). Per variant, [`CupedSums`] holds the users, the metric's and the covariate's sums and
//! sums of squares, and the sum of their products. `θ` is pooled over the two arms:
//! `cov(metric, covariate) / var(covariate)` of the two arms' sums added together. Each arm's
//! figure is `mean - θ · covariate mean`, its variance `σ²_metric + θ² σ²_covariate - 2θ cov`;
//! a relative lift divides by the control's unadjusted mean, and its variance by the delta
//! method uses the unadjusted means too (gbstats' `unadjusted_mean`). When `θ` is 0 (the pooled
//! metric or covariate does not vary, as when no user has a covariate) the comparison is the
//! unadjusted one, as in gbstats, and [`CupedEstimate::adjusted`] says so.
//!
//! The test is then gbstats': the effect `b - a` or `(b - a) / a`, its variance (the fixed
//! horizon's delta method of [`compare`](super::compare), or `var_b / n_b + var_a / n_a` for an
//! absolute difference), Welch's t with Welch-Satterthwaite degrees of freedom or the sequential
//! test's confidence sequence ([`compare_sequential`](super::compare_sequential)). The sums of
//! squares are taken apart as gbstats writes it (`sum_squares - sum² / n`), so the figures agree
//! with its own to rounding.
//!
//! **No estimate**, in gbstats' order: figures that are not finite numbers
//! ([`NoEstimate::Overflow`], gbstats has no such check), then a control figure of 0, adjusted or
//! not, for either difference ([`NoEstimate::ControlMeanZero`]: gbstats checks it for an
//! absolute difference too), then a variant without users ([`NoEstimate::NoUsers`], where
//! gbstats' t-tests say the variance is 0), then a variance that is not positive
//! ([`NoEstimate::ZeroVariance`]; for a ratio, also a treatment whose denominator sums to 0).

use super::sequential::{confidence_sequence, Method};
use super::stats::{welch_t_test, MetricKind, NoEstimate};

/// How the effect of a treatment is expressed (gbstats' `difference_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Difference {
    /// `(b - a) / a`: the lift relative to the control (gbstats' default).
    #[default]
    Relative,
    /// `b - a`: the difference in the metric's own unit.
    Absolute,
}

impl Difference {
    /// `relative` or `absolute`, gbstats' names.
    pub const fn as_str(self) -> &'static str {
        match self {
            Difference::Relative => "relative",
            Difference::Absolute => "absolute",
        }
    }
}

/// A treatment compared with the control by a frequentist test: the effect, its standard
/// error, interval and p-value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EffectEstimate {
    /// `(b - a) / a` or `b - a`, as the comparison's [`Difference`] says.
    pub effect: f64,
    /// The effect's standard error (gbstats' `uplift.stddev`).
    pub std_error: f64,
    /// The interval of the effect (95% confidence for the fixed-horizon test, `1 - alpha` at
    /// every look for the sequential one).
    pub ci_low: f64,
    /// See `ci_low`.
    pub ci_high: f64,
    /// Two-sided p-value of "no difference".
    pub p_value: f64,
}

/// The parts of a ratio metric: what each user's numerator and denominator are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RatioKinds {
    /// The numerator's kind (a conversion: each user's numerator is 0 or 1).
    pub numerator: MetricKind,
    /// The denominator's kind.
    pub denominator: MetricKind,
}

/// One variant's summary of a ratio metric (gbstats' `RatioStatistic`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RatioSums {
    /// Users.
    pub users: u64,
    /// Sum of the users' numerators.
    pub numerator: f64,
    /// Sum of their squares (ignored for a conversion, whose squares are its values).
    pub numerator_squares: f64,
    /// Sum of the users' denominators.
    pub denominator: f64,
    /// Sum of their squares (ignored for a conversion).
    pub denominator_squares: f64,
    /// Sum over users of numerator times denominator.
    pub products: f64,
}

impl RatioSums {
    /// The variant's ratio, numerator sum over denominator sum; 0 when the denominator sums
    /// to 0 (as gbstats).
    pub fn ratio(&self) -> f64 {
        if self.denominator == 0.0 {
            0.0
        } else {
            self.numerator / self.denominator
        }
    }

    /// The figures gbstats' tests take from this variant.
    fn moments(&self, kinds: RatioKinds) -> Moments {
        let n = self.users as f64;
        let m = Part::new(kinds.numerator, n, self.numerator, self.numerator_squares);
        let d = Part::new(
            kinds.denominator,
            n,
            self.denominator,
            self.denominator_squares,
        );
        let variance = if d.mean == 0.0 || self.users <= 1 {
            0.0
        } else {
            let cov = covariance(self.users, self.products, self.numerator, self.denominator);
            m.variance / d.mean.powi(2) - 2.0 * cov * m.mean / d.mean.powi(3)
                + m.mean.powi(2) * d.variance / d.mean.powi(4)
        };
        let mean = self.ratio();
        Moments {
            users: self.users,
            mean,
            unadjusted_mean: mean,
            variance,
            finite: [m.mean, m.variance, d.mean, d.variance, self.products]
                .iter()
                .all(|x| x.is_finite()),
        }
    }
}

/// One variant's summary of a metric with its pre-exposure covariate (gbstats'
/// `RegressionAdjustedStatistic`). A user without a covariate counts as 0.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CupedSums {
    /// Users.
    pub users: u64,
    /// Sum of the users' values of the metric.
    pub metric: f64,
    /// Sum of their squares (ignored for a conversion, whose squares are its values).
    pub metric_squares: f64,
    /// Sum of the users' covariates (the metric before their first exposure).
    pub covariate: f64,
    /// Sum of their squares (ignored for a conversion).
    pub covariate_squares: f64,
    /// Sum over users of metric times covariate.
    pub products: f64,
}

/// A CUPED comparison: the adjusted estimate and the `θ` it used.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CupedEstimate {
    /// The effect of the treatment on the adjusted figures.
    pub estimate: EffectEstimate,
    /// `θ`, pooled over both arms; 0 when the comparison fell back to the unadjusted one.
    pub theta: f64,
    /// Whether the figures are adjusted: `false` when `θ` is 0 and the estimate is the
    /// unadjusted comparison's, as in gbstats.
    pub adjusted: bool,
}

/// Compares `treatment` with `control` on a ratio metric whose parts are `kinds`: gbstats'
/// `RatioStatistic` under `method`'s test, the effect expressed as `difference` says.
/// The cases without an estimate are the module's.
pub fn compare_ratio(
    kinds: RatioKinds,
    control: &RatioSums,
    treatment: &RatioSums,
    difference: Difference,
    method: &Method,
) -> Result<EffectEstimate, NoEstimate> {
    test(
        &control.moments(kinds),
        &treatment.moments(kinds),
        difference,
        method,
    )
}

/// Compares `treatment` with `control` on a metric of `kind` adjusted by its covariate (CUPED,
/// the covariate of the same kind): gbstats' `RegressionAdjustedStatistic` with `θ` pooled over
/// both arms, under `method`'s test, the effect expressed as `difference` says. The cases
/// without an estimate are the module's.
pub fn compare_cuped(
    kind: MetricKind,
    control: &CupedSums,
    treatment: &CupedSums,
    difference: Difference,
    method: &Method,
) -> Result<CupedEstimate, NoEstimate> {
    let theta = pooled_theta(kind, control, treatment);
    let (a, b) = (
        cuped_moments(kind, control, theta),
        cuped_moments(kind, treatment, theta),
    );
    let estimate = test(&a, &b, difference, method)?;
    Ok(CupedEstimate {
        estimate,
        theta,
        adjusted: theta != 0.0,
    })
}

/// `θ` of gbstats' `compute_theta`: the covariance of metric and covariate over the sums of
/// both arms, over the covariate's variance; 0 when either pooled variance is 0 (or not a
/// number).
fn pooled_theta(kind: MetricKind, a: &CupedSums, b: &CupedSums) -> f64 {
    let users = a.users + b.users;
    let n = users as f64;
    let (metric, covariate) = (a.metric + b.metric, a.covariate + b.covariate);
    let post = Part::new(kind, n, metric, a.metric_squares + b.metric_squares);
    let pre = Part::new(
        kind,
        n,
        covariate,
        a.covariate_squares + b.covariate_squares,
    );
    // gbstats: `if variance == 0: return 0`; a NaN variance is not 0 there either, and its θ
    // is NaN, which the comparison reports as an overflow.
    if pre.variance == 0.0 || post.variance == 0.0 {
        return 0.0;
    }
    covariance(users, a.products + b.products, metric, covariate) / pre.variance
}

/// One arm's figures under CUPED with `theta`; with `theta` 0, the unadjusted metric's (gbstats
/// reverts to its post statistic).
fn cuped_moments(kind: MetricKind, sums: &CupedSums, theta: f64) -> Moments {
    let n = sums.users as f64;
    let post = Part::new(kind, n, sums.metric, sums.metric_squares);
    let finite = [post.mean, post.variance].iter().all(|x| x.is_finite());
    if theta == 0.0 {
        return Moments {
            users: sums.users,
            mean: post.mean,
            unadjusted_mean: post.mean,
            variance: post.variance,
            finite,
        };
    }
    let pre = Part::new(kind, n, sums.covariate, sums.covariate_squares);
    let variance = if sums.users <= 1 {
        0.0
    } else {
        let cov = covariance(sums.users, sums.products, sums.metric, sums.covariate);
        post.variance + theta.powi(2) * pre.variance - 2.0 * theta * cov
    };
    Moments {
        users: sums.users,
        mean: post.mean - theta * pre.mean,
        unadjusted_mean: post.mean,
        variance,
        finite: finite
            && [theta, pre.mean, pre.variance, sums.products]
                .iter()
                .all(|x| x.is_finite()),
    }
}

/// One part of a statistic (gbstats' `ProportionStatistic` or `SampleMeanStatistic`): its mean
/// per user and the variance of one user's value.
struct Part {
    mean: f64,
    variance: f64,
}

impl Part {
    fn new(kind: MetricKind, n: f64, sum: f64, sum_squares: f64) -> Part {
        let mean = if n == 0.0 { 0.0 } else { sum / n };
        let variance = match kind {
            MetricKind::Conversion => mean * (1.0 - mean),
            MetricKind::Mean if n <= 1.0 => 0.0,
            // gbstats' order, `sum² / n`; `sum · (sum / n)` only where the square overflows.
            MetricKind::Mean => (sum_squares - square_over(sum, sum, n)) / (n - 1.0),
        };
        Part { mean, variance }
    }
}

/// The sample covariance of two parts from their sums (gbstats' `covariance`); 0 with fewer
/// than two users.
fn covariance(users: u64, products: f64, sum_x: f64, sum_y: f64) -> f64 {
    if users <= 1 {
        return 0.0;
    }
    let n = users as f64;
    (products - square_over(sum_x, sum_y, n)) / (n - 1.0)
}

/// `x · y / n` as gbstats writes it, or `x · (y / n)` where the product leaves the float range.
fn square_over(x: f64, y: f64, n: f64) -> f64 {
    let product = x * y;
    if product.is_finite() {
        product / n
    } else {
        x * (y / n)
    }
}

/// What gbstats' tests take from one arm's statistic.
struct Moments {
    users: u64,
    /// The figure compared (the ratio, or the CUPED-adjusted mean).
    mean: f64,
    /// The figure before any adjustment (gbstats' `unadjusted_mean`).
    unadjusted_mean: f64,
    /// The variance of one user's contribution.
    variance: f64,
    /// Whether every figure behind these is a finite number.
    finite: bool,
}

/// gbstats' `compute_result` of `TwoSidedTTest` or `SequentialTwoSidedTTest` on two arms.
fn test(
    a: &Moments,
    b: &Moments,
    difference: Difference,
    method: &Method,
) -> Result<EffectEstimate, NoEstimate> {
    let figures = [a.mean, a.unadjusted_mean, a.variance, b.mean, b.variance];
    if !(a.finite && b.finite && figures.iter().all(|x| x.is_finite())) {
        return Err(NoEstimate::Overflow);
    }
    if a.mean == 0.0 || a.unadjusted_mean == 0.0 {
        return Err(NoEstimate::ControlMeanZero);
    }
    if a.users == 0 || b.users == 0 {
        return Err(NoEstimate::NoUsers);
    }
    if a.variance <= 0.0 || b.variance <= 0.0 {
        return Err(NoEstimate::ZeroVariance);
    }
    let (n_a, n_b) = (a.users as f64, b.users as f64);
    let (effect, variance) = match difference {
        Difference::Relative => {
            let (u_a, u_b) = (a.unadjusted_mean, b.unadjusted_mean);
            (
                (b.mean - a.mean) / u_a,
                b.variance / (u_a.powi(2) * n_b) + a.variance * u_b.powi(2) / (u_a.powi(4) * n_a),
            )
        }
        Difference::Absolute => (b.mean - a.mean, b.variance / n_b + a.variance / n_a),
    };
    if !(variance.is_finite() && variance > 0.0) {
        return Err(NoEstimate::Overflow);
    }
    let (p_value, width) = match method {
        Method::FixedHorizon => {
            welch_t_test(effect, variance, (a.variance, n_a), (b.variance, n_b))?
        }
        Method::Sequential(config) => confidence_sequence(effect, variance, n_a + n_b, config),
    };
    let estimate = EffectEstimate {
        effect,
        std_error: variance.sqrt(),
        ci_low: effect - width,
        ci_high: effect + width,
        p_value,
    };
    let figures = [estimate.effect, estimate.ci_low, estimate.ci_high, p_value];
    if figures.iter().all(|x| x.is_finite()) {
        Ok(estimate)
    } else {
        Err(NoEstimate::Overflow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH_MEANS: RatioKinds = RatioKinds {
        numerator: MetricKind::Mean,
        denominator: MetricKind::Mean,
    };

    fn cuped(users: u64, metric: f64, covariate: f64, products: f64) -> CupedSums {
        CupedSums {
            users,
            metric,
            metric_squares: metric * 3.0,
            covariate,
            covariate_squares: covariate * 3.0,
            products,
        }
    }

    #[test]
    fn the_names_are_gbstats() {
        assert_eq!(Difference::Relative.as_str(), "relative");
        assert_eq!(Difference::Absolute.as_str(), "absolute");
        assert_eq!(Difference::default(), Difference::Relative);
    }

    #[test]
    fn a_ratio_without_denominator_is_zero() {
        assert_eq!(RatioSums::default().ratio(), 0.0);
        let control = RatioSums {
            users: 10,
            numerator: 5.0,
            numerator_squares: 5.0,
            ..RatioSums::default()
        };
        let method = Method::FixedHorizon;
        let r = compare_ratio(
            BOTH_MEANS,
            &control,
            &control,
            Difference::Absolute,
            &method,
        );
        assert_eq!(r, Err(NoEstimate::ControlMeanZero));
    }

    #[test]
    fn no_covariate_is_the_unadjusted_comparison() {
        let (a, b) = (cuped(1000, 100.0, 0.0, 0.0), cuped(1000, 120.0, 0.0, 0.0));
        let method = Method::FixedHorizon;
        let r = compare_cuped(MetricKind::Mean, &a, &b, Difference::Relative, &method).unwrap();
        assert!(!r.adjusted);
        assert_eq!(r.theta, 0.0);
        let sums = |s: &CupedSums| super::super::VariantSums {
            users: s.users,
            sum: s.metric,
            sum_squares: s.metric_squares,
        };
        let plain = super::super::compare(MetricKind::Mean, &sums(&a), &sums(&b)).unwrap();
        assert!((r.estimate.effect - plain.lift).abs() < 1e-15);
        assert!((r.estimate.p_value - plain.p_value).abs() < 1e-12);
        assert!((r.estimate.ci_low - plain.ci_low).abs() < 1e-12);
    }

    #[test]
    fn bad_input_is_an_error_never_a_panic() {
        let method = Method::FixedHorizon;
        for bad in [f64::NAN, f64::INFINITY, f64::MAX] {
            let a = cuped(100, bad, 10.0, 50.0);
            let b = cuped(100, 20.0, 10.0, 50.0);
            for difference in [Difference::Relative, Difference::Absolute] {
                assert!(compare_cuped(MetricKind::Mean, &a, &b, difference, &method).is_err());
                let r = RatioSums {
                    users: 100,
                    numerator: bad,
                    numerator_squares: 1.0,
                    denominator: 10.0,
                    denominator_squares: 10.0,
                    products: 1.0,
                };
                assert!(compare_ratio(BOTH_MEANS, &r, &r, difference, &method).is_err());
            }
        }
        let empty = CupedSums::default();
        let some = cuped(100, 20.0, 10.0, 50.0);
        assert_eq!(
            compare_cuped(
                MetricKind::Mean,
                &some,
                &empty,
                Difference::Relative,
                &method
            ),
            Err(NoEstimate::NoUsers)
        );
    }
}
