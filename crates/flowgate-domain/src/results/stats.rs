//! The statistics of experiment results, as GrowthBook's stats engine computes them (D22):
//! gbstats 0.8.0's `TwoSidedTTest` and `EffectBayesianABTest` with their default configurations
//! (relative lift, alpha 0.05, an improper flat prior), and `check_srm`. Golden vectors
//! generated with gbstats itself are the tests (`tests/data/gbstats/`).
//!
//! A metric is summarised per variant by the number of users, the sum of their values and the
//! sum of their squares. A conversion's variance is `p(1 - p)` (gbstats'
//! `ProportionStatistic`), a mean's the sample variance (`SampleMeanStatistic`). The relative
//! lift `(mean_b - mean_a) / mean_a` has its variance by the delta method; the frequentist test
//! is Welch's t-test with Welch-Satterthwaite degrees of freedom; the Bayesian one takes the same
//! Gaussian effect with a flat prior. The t, normal and chi-square distributions are statrs',
//! the t's cdf with the incomplete beta function's prefactor computed here (`t_cdf`) so that
//! it stays as accurate as SciPy's at millions of degrees of freedom.

use statrs::distribution::{ChiSquared, ContinuousCDF, Normal, StudentsT};

/// `alpha` of the intervals: 95% confidence and credible intervals.
pub const ALPHA: f64 = 0.05;

/// What a metric is (D22).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricKind {
    /// The share of users with at least one event: each user's value is 0 or 1.
    Conversion,
    /// The mean of a value per user (revenue per user).
    Mean,
}

impl MetricKind {
    /// `conversion` or `mean`.
    pub const fn as_str(self) -> &'static str {
        match self {
            MetricKind::Conversion => "conversion",
            MetricKind::Mean => "mean",
        }
    }
}

/// One variant's summary of one metric: its users, the sum of their values, the sum of their
/// squares (for a conversion, the sum twice: each value is 0 or 1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VariantSums {
    /// Users.
    pub users: u64,
    /// Sum of the users' values.
    pub sum: f64,
    /// Sum of the squares of the users' values.
    pub sum_squares: f64,
}

impl VariantSums {
    /// The mean value per user; 0 without users.
    pub fn mean(&self) -> f64 {
        if self.users == 0 {
            0.0
        } else {
            self.sum / self.users as f64
        }
    }

    /// The variance of one user's value, as gbstats computes it for `kind`.
    pub fn variance(&self, kind: MetricKind) -> f64 {
        match kind {
            MetricKind::Conversion => {
                let p = self.mean();
                p * (1.0 - p)
            }
            MetricKind::Mean => {
                if self.users <= 1 {
                    return 0.0;
                }
                let n = self.users as f64;
                // `sum * (sum / n)`, not `sum * sum / n`: the square of a large sum can leave
                // the float range where the sum of squares does not.
                (self.sum_squares - self.sum * (self.sum / n)) / (n - 1.0)
            }
        }
    }

    /// `Err(`[`NoEstimate::Overflow`]`)` when a figure of these sums cannot be computed: the
    /// sum, the sum of squares, the mean or `kind`'s variance is not a finite number (stored
    /// values too large to add up in a 64-bit float). The report then gives the figure's
    /// reason instead of a number; without it, JSON would show `null` and a comparison a
    /// wrong reason.
    pub fn computable(&self, kind: MetricKind) -> Result<(), NoEstimate> {
        let figures = [self.sum, self.sum_squares, self.mean(), self.variance(kind)];
        if figures.iter().all(|x| x.is_finite()) {
            Ok(())
        } else {
            Err(NoEstimate::Overflow)
        }
    }

    /// The 95% confidence interval of the mean per user, `mean ± z·√(variance / users)` with
    /// the normal quantile `z` and `kind`'s variance (the Wald interval for a conversion);
    /// `None` without users or when the figures are not [`computable`](Self::computable). What
    /// the console draws around each variant's mean (D24); the comparisons between variants
    /// are [`compare`]'s.
    pub fn mean_interval(&self, kind: MetricKind) -> Option<(f64, f64)> {
        if self.users == 0 || self.computable(kind).is_err() {
            return None;
        }
        let z = Normal::standard().inverse_cdf(1.0 - ALPHA / 2.0);
        let half = z * (self.variance(kind).max(0.0) / self.users as f64).sqrt();
        let mean = self.mean();
        Some((mean - half, mean + half))
    }
}

/// A variant compared with the control: the relative lift with its frequentist and Bayesian
/// figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// `(mean_b - mean_a) / mean_a`.
    pub lift: f64,
    /// The 95% confidence interval of the lift (Welch's t).
    pub ci_low: f64,
    /// See `ci_low`.
    pub ci_high: f64,
    /// Two-sided p-value of "no difference".
    pub p_value: f64,
    /// The posterior probability that the variant's mean is above the control's.
    pub chance_to_win: f64,
    /// The 95% credible interval of the lift.
    pub credible_low: f64,
    /// See `credible_low`.
    pub credible_high: f64,
}

/// Why there is no estimate: the cases where gbstats returns none (D22).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoEstimate {
    /// The control's mean is 0: a relative lift is undefined (gbstats
    /// `ZERO_NEGATIVE_BASELINE_VARIATION`).
    #[error("the control's mean is 0, so a relative lift is undefined")]
    ControlMeanZero,
    /// A variant has no users (gbstats `NO_UNITS_IN_VARIATION`).
    #[error("a variant has no users")]
    NoUsers,
    /// A variant's values do not vary: every user converted, or none did, or fewer than two
    /// users (gbstats `ZERO_NEGATIVE_VARIANCE`).
    #[error(
        "a variant's values do not vary (every or no user converted, or fewer than two users)"
    )]
    ZeroVariance,
    /// A figure cannot be computed: a variant's sum, sum of squares, mean or variance, or the
    /// lift's variance, is beyond a 64-bit float (stored values far outside an event's range,
    /// such as a revenue near `f64::MAX`). Not a gbstats case: gbstats would give `inf` or
    /// `nan`; the report says why instead.
    #[error(
        "a figure is too large to compute: a variant's sum, sum of squares or variance \
         overflows (stored values far outside an event's range)"
    )]
    Overflow,
}

impl NoEstimate {
    /// The stable reason code (D22).
    pub const fn code(self) -> &'static str {
        match self {
            NoEstimate::ControlMeanZero => "control_mean_zero",
            NoEstimate::NoUsers => "no_users",
            NoEstimate::ZeroVariance => "zero_variance",
            NoEstimate::Overflow => "overflow",
        }
    }
}

/// Compares `treatment` with `control` for a metric of `kind`: gbstats' `TwoSidedTTest` and
/// `EffectBayesianABTest`, each with its default configuration. Their checks, in
/// `EffectBayesianABTest`'s order (`TwoSidedTTest` has no separate check for an empty
/// variant: its variance is then 0), decide when there is no estimate. Before them, figures
/// that are not finite numbers are [`NoEstimate::Overflow`] (gbstats has no such check), so an
/// overflow never passes for another reason.
pub fn compare(
    kind: MetricKind,
    control: &VariantSums,
    treatment: &VariantSums,
) -> Result<Estimate, NoEstimate> {
    let Lift {
        lift,
        variance,
        var_a,
        var_b,
        n_a,
        n_b,
    } = relative_lift(kind, control, treatment)?;
    let sd = variance.sqrt();
    let (p_value, width) = welch_t_test(lift, variance, (var_a, n_a), (var_b, n_b))?;
    // The flat prior leaves the posterior of the effect at the data's: N(lift, variance).
    let posterior = Normal::new(lift, sd).map_err(|_| NoEstimate::Overflow)?;
    let estimate = Estimate {
        lift,
        ci_low: lift - width,
        ci_high: lift + width,
        p_value,
        chance_to_win: posterior.sf(0.0),
        credible_low: posterior.inverse_cdf(ALPHA / 2.0),
        credible_high: posterior.inverse_cdf(1.0 - ALPHA / 2.0),
    };
    let figures = [
        estimate.lift,
        estimate.ci_low,
        estimate.ci_high,
        estimate.p_value,
        estimate.chance_to_win,
        estimate.credible_low,
        estimate.credible_high,
    ];
    if figures.iter().all(|x| x.is_finite()) {
        Ok(estimate)
    } else {
        Err(NoEstimate::Overflow)
    }
}

/// gbstats' `TwoSidedTTest` from an effect, its variance and each arm's variance of one user's
/// figure and users (`(variance, users)`, the control's first): the two-sided p-value and the
/// half-width of the `1 - ALPHA` interval, with Welch-Satterthwaite degrees of freedom.
/// [`NoEstimate::Overflow`] when the effect's variance or the degrees of freedom are not positive
/// finite numbers (both arms' variances are positive and finite when called: anything else
/// overflowed or underflowed on the way).
pub(crate) fn welch_t_test(
    effect: f64,
    variance: f64,
    (var_a, n_a): (f64, f64),
    (var_b, n_b): (f64, f64),
) -> Result<(f64, f64), NoEstimate> {
    let sd = variance.sqrt();
    // Welch-Satterthwaite degrees of freedom.
    let dof = (var_b / n_b + var_a / n_a).powi(2)
        / (var_b.powi(2) / (n_b.powi(2) * (n_b - 1.0))
            + var_a.powi(2) / (n_a.powi(2) * (n_a - 1.0)));
    if !(variance.is_finite() && variance > 0.0 && dof.is_finite() && dof > 0.0) {
        return Err(NoEstimate::Overflow);
    }
    let t = StudentsT::new(0.0, 1.0, dof).map_err(|_| NoEstimate::Overflow)?;
    // As gbstats writes it, 2 * (1 - cdf(|t|)), with SciPy's cdf rounded to a float first.
    let p_value = 2.0 * (1.0 - t_cdf(&t, (effect / sd).abs()));
    let width = t_quantile(&t, 1.0 - ALPHA / 2.0) * sd;
    Ok((p_value, width))
}

/// The relative lift of a treatment over the control, its variance by the delta method, and
/// the figures behind them: what the fixed-horizon and the sequential test share.
pub(crate) struct Lift {
    /// `(mean_b - mean_a) / mean_a`.
    pub(crate) lift: f64,
    /// Its variance (gbstats `frequentist_variance`); not checked for overflow here.
    pub(crate) variance: f64,
    /// The control's variance of one user's figure.
    pub(crate) var_a: f64,
    /// The treatment's.
    pub(crate) var_b: f64,
    /// The control's users.
    pub(crate) n_a: f64,
    /// The treatment's.
    pub(crate) n_b: f64,
}

/// [`Lift`] of `treatment` over `control`, after the checks of `EffectBayesianABTest`'s order
/// that both tests make: figures that are not finite, a control mean of 0, a variant without
/// users, a variance that is not positive.
pub(crate) fn relative_lift(
    kind: MetricKind,
    control: &VariantSums,
    treatment: &VariantSums,
) -> Result<Lift, NoEstimate> {
    control.computable(kind)?;
    treatment.computable(kind)?;
    let (mean_a, mean_b) = (control.mean(), treatment.mean());
    if mean_a == 0.0 {
        return Err(NoEstimate::ControlMeanZero);
    }
    if control.users == 0 || treatment.users == 0 {
        return Err(NoEstimate::NoUsers);
    }
    let (var_a, var_b) = (control.variance(kind), treatment.variance(kind));
    if var_a <= 0.0 || var_b <= 0.0 {
        return Err(NoEstimate::ZeroVariance);
    }
    let (n_a, n_b) = (control.users as f64, treatment.users as f64);
    Ok(Lift {
        lift: (mean_b - mean_a) / mean_a,
        variance: var_b / (mean_a.powi(2) * n_b) + var_a * mean_b.powi(2) / (mean_a.powi(4) * n_a),
        var_a,
        var_b,
        n_a,
        n_b,
    })
}

/// The `p` quantile of `t`: statrs' inverse, polished by Newton's method on [`t_cdf`]. statrs
/// inverts the incomplete beta function, which loses accuracy at the degrees of freedom of large
/// experiments (about 2e-4 relative at 2,000,000, where gbstats' scipy is exact); the cdf
/// holds, so Newton steps on it bring the quantile back to SciPy's within 1e-10.
fn t_quantile(t: &StudentsT, p: f64) -> f64 {
    use statrs::distribution::Continuous;
    let mut x = t.inverse_cdf(p);
    for _ in 0..3 {
        let density = t.pdf(x);
        if !(density.is_finite() && density > 0.0) {
            break;
        }
        let step = (t_cdf(t, x) - p) / density;
        if !step.is_finite() {
            break;
        }
        x -= step;
    }
    x
}

/// The cdf of `t` at `x`, as accurate as SciPy's at every number of degrees of freedom. statrs'
/// cdf is `I_h(ν/2, 1/2) / 2` with `h = ν / (ν + x²)` and `ln B` from three `ln Γ` of about
/// `ν/2 · ln ν`: at millions of degrees of freedom their difference loses about 1e-8 relative,
/// which the tail of a large experiment's p-value keeps. Here the beta function's prefactor is
/// taken from `1 - h = x² / (ν + x²)` directly and `ln Γ(a + 1/2) - ln Γ(a)` from its
/// asymptotic series, with the same continued fraction.
pub(crate) fn t_cdf(t: &StudentsT, x: f64) -> f64 {
    let dof = t.freedom();
    if !(x.is_finite() && dof.is_finite()) {
        return t.cdf(x);
    }
    let tail = t_upper_tail(x.abs(), dof);
    if x < 0.0 {
        tail
    } else {
        1.0 - tail
    }
}

/// `P(T > x)` for `x >= 0` and `ν` degrees of freedom: `I_h(a, 1/2) / 2` with `a = ν/2`,
/// `h = ν / (ν + x²)`, by the continued fraction of the incomplete beta function (the one of
/// `1 - I_{1-h}(1/2, a)` where that converges faster).
fn t_upper_tail(x: f64, dof: f64) -> f64 {
    let x2 = x * x;
    let (h, one_minus_h) = (dof / (dof + x2), x2 / (dof + x2));
    let (a, b) = (dof / 2.0, 0.5);
    // ln(h^a (1 - h)^b / B(a, b)), B(a, 1/2) = Γ(a) Γ(1/2) / Γ(a + 1/2).
    let ln_gamma_ratio = if a >= 1000.0 {
        // ln Γ(a + 1/2) - ln Γ(a) = ln a / 2 + ln(1 - 1/8a + 1/128a² + 5/1024a³ - 21/32768a⁴),
        // within 1e-18 from a = 1000 on.
        let series = 1.0 - 1.0 / (8.0 * a) + 1.0 / (128.0 * a * a) + 5.0 / (1024.0 * a.powi(3))
            - 21.0 / (32768.0 * a.powi(4));
        0.5 * a.ln() + series.ln()
    } else {
        use statrs::function::gamma::ln_gamma;
        ln_gamma(a + b) - ln_gamma(a)
    };
    let ln_sqrt_pi = 0.5 * std::f64::consts::PI.ln();
    let ln_front = a * (-one_minus_h).ln_1p() + b * one_minus_h.ln() + ln_gamma_ratio - ln_sqrt_pi;
    let front = ln_front.exp();
    if h < (a + 1.0) / (a + b + 2.0) {
        0.5 * front * beta_continued_fraction(a, b, h) / a
    } else {
        0.5 * (1.0 - front * beta_continued_fraction(b, a, one_minus_h) / b)
    }
}

/// The continued fraction of the regularised incomplete beta function `I_x(a, b)` (modified
/// Lentz), as statrs and Numerical Recipes have it, run to convergence.
fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - qab * x / qap);
    let mut h = d;
    // About √a steps near the switch between the two fractions: 1,000,000 covers any
    // experiment's degrees of freedom.
    for m in 1..1_000_000 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let even = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        h *= d * c;
        let odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() <= f64::EPSILON / 2.0 {
            break;
        }
    }
    h
}

/// The sample ratio mismatch check (gbstats `check_srm`): the p-value of a chi-square test of
/// the users per variant against the variants' weights. Variants of weight 0 are left out of
/// the statistic (they still count in its degrees of freedom, as in gbstats); no users at all
/// is 1.
pub fn srm_p_value(users: &[u64], weights: &[f64]) -> f64 {
    let total: u64 = users.iter().sum();
    if total == 0 || users.len() < 2 {
        return 1.0;
    }
    let total_weight: f64 = weights.iter().sum();
    let mut x = 0.0;
    for (&observed, &weight) in users.iter().zip(weights) {
        if weight <= 0.0 {
            continue;
        }
        let expected = weight / total_weight * total as f64;
        x += (observed as f64 - expected).powi(2) / expected;
    }
    match ChiSquared::new((users.len() - 1) as f64) {
        Ok(chi2) => chi2.sf(x),
        Err(_) => 1.0,
    }
}

/// The two-sided p-value of Fisher's exact test of two proportions: `successes_a` of `users_a`
/// against `successes_b` of `users_b`, as SciPy's `fisher_exact` computes it (the tables as
/// likely as the observed one or less, with its relative tolerance of 1e-7). D35: a treatment
/// with none of a conversion the control has has no estimate from gbstats (zero variance), yet
/// 0 of 68 against 317 of 634 is the clearest "worse" there is; this test judges it.
///
/// The number of successes of `a` follows a hypergeometric distribution given the margins; its
/// probabilities rise to the mode and fall after it, so each tail is summed outward from where it
/// starts until its terms no longer change the sum, whatever the number of users.
pub fn fisher_exact(successes_a: u64, users_a: u64, successes_b: u64, users_b: u64) -> f64 {
    use statrs::function::factorial::ln_binomial;
    let (x, n_a) = (successes_a.min(users_a), users_a);
    let total = users_a + users_b;
    let k = x + successes_b.min(users_b);
    if n_a == 0 || users_b == 0 || k == 0 || k == total {
        return 1.0;
    }
    let ln_all = ln_binomial(total, n_a);
    let ln_p = |i: u64| ln_binomial(k, i) + ln_binomial(total - k, n_a - i) - ln_all;
    let low = n_a.saturating_sub(total - k);
    let high = k.min(n_a);
    let mode =
        (((n_a + 1) as f64 * (k + 1) as f64 / (total + 2) as f64).floor() as u64).clamp(low, high);
    if x == mode {
        return 1.0;
    }
    // SciPy's tolerance: tables within 1e-7 (relative) of the observed one's count as it.
    let limit = ln_p(x) + (1.0 + 1e-7_f64).ln();
    if ln_p(mode) <= limit {
        return 1.0;
    }
    // The sum of one tail, from `start` outward by `step` (+1 or -1) to `end`.
    let tail = |start: u64, end: u64, up: bool| {
        let mut sum = 0.0;
        let mut i = start;
        loop {
            let term = ln_p(i).exp();
            sum += term;
            if i == end || term <= sum * 1e-17 {
                return sum;
            }
            i = if up { i + 1 } else { i - 1 };
        }
    };
    // The other tail starts at the first value past the mode as unlikely as `x` or less: the
    // probabilities fall monotonically there, so a binary search finds it.
    let (mut near, mut far) = if x < mode { (mode, high) } else { (mode, low) };
    if ln_p(far) > limit {
        return tail(x, if x < mode { low } else { high }, x > mode).min(1.0);
    }
    while near.abs_diff(far) > 1 {
        let mid = near.min(far) + near.abs_diff(far) / 2;
        if ln_p(mid) <= limit {
            far = mid;
        } else {
            near = mid;
        }
    }
    let own = if x < mode {
        tail(x, low, false)
    } else {
        tail(x, high, true)
    };
    let other = if x < mode {
        tail(far, high, true)
    } else {
        tail(far, low, false)
    };
    (own + other).min(1.0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A conversion's sums: `converted` of `users` (each 0 or 1).
    pub(crate) fn conv(users: u64, converted: u64) -> VariantSums {
        VariantSums {
            users,
            sum: converted as f64,
            sum_squares: converted as f64,
        }
    }

    #[test]
    fn the_checks_come_in_gbstats_order() {
        let kind = MetricKind::Conversion;
        assert_eq!(
            compare(kind, &conv(100, 0), &conv(0, 0)),
            Err(NoEstimate::ControlMeanZero)
        );
        assert_eq!(
            compare(kind, &conv(100, 10), &conv(0, 0)),
            Err(NoEstimate::NoUsers)
        );
        assert_eq!(
            compare(kind, &conv(100, 100), &conv(100, 10)),
            Err(NoEstimate::ZeroVariance)
        );
        let one = VariantSums {
            users: 1,
            sum: 5.0,
            sum_squares: 25.0,
        };
        assert_eq!(
            compare(MetricKind::Mean, &one, &one),
            Err(NoEstimate::ZeroVariance)
        );
        assert!(compare(kind, &conv(100, 10), &conv(100, 12)).is_ok());
    }

    #[test]
    fn the_interval_of_a_mean_is_the_textbook_one() {
        // 50 of 100 converted: 0.5 ± 1.95996 × √(0.25 / 100) = 0.5 ± 0.0979982.
        let (low, high) = conv(100, 50).mean_interval(MetricKind::Conversion).unwrap();
        assert!((low - 0.402_001_8).abs() < 1e-6, "{low}");
        assert!((high - 0.597_998_2).abs() < 1e-6, "{high}");
        // Values 1, 2, 3: mean 2, sample variance 1, 2 ± 1.95996 / √3.
        let sums = VariantSums {
            users: 3,
            sum: 6.0,
            sum_squares: 14.0,
        };
        let (low, high) = sums.mean_interval(MetricKind::Mean).unwrap();
        assert!((low - 0.868_414_3).abs() < 1e-6, "{low}");
        assert!((high - 3.131_585_7).abs() < 1e-6, "{high}");
        assert_eq!(VariantSums::default().mean_interval(MetricKind::Mean), None);
    }

    #[test]
    fn srm_without_users_or_with_one_variant_is_one() {
        assert_eq!(srm_p_value(&[0, 0], &[0.5, 0.5]), 1.0);
        assert_eq!(srm_p_value(&[10], &[1.0]), 1.0);
        assert!(srm_p_value(&[500, 500], &[0.5, 0.5]) > 0.99);
        assert!(srm_p_value(&[600, 400], &[0.5, 0.5]) < 0.001);
    }
}
