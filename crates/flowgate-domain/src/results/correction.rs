//! Corrections for many comparisons (D36): a report's p-values adjusted as one family, and
//! its confidence intervals adjusted to match, as GrowthBook does.
//!
//! **Adjusted p-values** equal statsmodels' `multipletests` (golden vectors written by
//! statsmodels itself: `tests/data/corrections/`):
//! - [`Correction::HolmBonferroni`] is `method="holm"`, which controls the family-wise error
//!   rate: with the `m` p-values sorted ascending, the `k`-th (from 0) is multiplied by `m - k`,
//!   each then raised to the largest before it (so the order never inverts) and capped at 1.
//! - [`Correction::BenjaminiHochberg`] is `method="fdr_bh"`, which controls the false
//!   discovery rate: the `k`-th of the sorted p-values (from 1) is divided by `k / m`, each then
//!   lowered to the smallest after it and capped at 1.
//!
//! The arithmetic is statsmodels', operation for operation (`p * (m - k)`, `p / (k / m)`), so
//! the figures agree to the last bit. Tied p-values get the same adjusted value whatever order
//! the sort leaves them in. A p-value of 0 stays 0; 1 stays 1.
//!
//! **NaN**: statsmodels has no NaN handling (a NaN poisons the running maximum or minimum of
//! everything sorted near it). Here a NaN p-value (a comparison without one) is left out of the
//! family, so the family is smaller by one, and its adjusted value is NaN. Other values are not
//! checked: p-values are expected in `[0, 1]`, and anything else is adjusted by the same
//! arithmetic as statsmodels would (an infinite one is capped at 1).
//!
//! **Adjusted intervals**: neither correction has a confidence interval of its own. GrowthBook
//! builds one ad hoc for either correction (its documentation, "Multiple Testing Corrections",
//! docs.growthbook.io/statistics/multiple-corrections: "we back out what the experiment effect
//! standard deviation would need to be to produce that adjusted p-value. We then construct CIs
//! using this adjusted standard deviation"; the rule's details are in `getAdjustedCI` of
//! GrowthBook's `packages/shared/src/experiments.ts`; gbstats 0.8.0 has no such function).
//! [`adjusted_interval`] follows it:
//! - an adjusted p-value above 0.999999 (that is, 1) gives an unbounded interval, which
//!   GrowthBook's documentation calls undefined;
//! - otherwise the standard deviation is `|lift / z(1 - p_adjusted / 2)|` (`z` the standard
//!   normal quantile) and the interval `lift ± z(1 - alpha / 2) · sd`, so an adjusted p-value
//!   below `alpha` gives an interval that excludes zero and one above it an interval that
//!   includes it;
//! - that interval replaces the original only when it is wider on both sides: a correction
//!   never narrows an interval (a sequential interval, wider than a fixed-horizon one, is often
//!   kept as it is), and a lift of exactly 0, which has no such standard deviation, keeps its
//!   interval.
//!
//! Nothing here knows what a family is: the report decides which comparisons form one (D36:
//! every treatment and metric of the report) and passes their p-values in one slice.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

/// Above this adjusted p-value GrowthBook takes the adjusted p-value for 1 and the interval
/// for unbounded.
pub const UNBOUNDED_ABOVE: f64 = 0.999999;

/// Which correction a report applies to its family of comparisons (D36: the experiment's
/// `analysis.correction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Correction {
    /// `none`: every comparison's p-value and interval as computed.
    #[default]
    None,
    /// `holm-bonferroni`: Holm's step-down procedure, controlling the family-wise error rate.
    HolmBonferroni,
    /// `benjamini-hochberg`: the Benjamini-Hochberg step-up procedure, controlling the false
    /// discovery rate.
    BenjaminiHochberg,
}

impl Correction {
    /// `none`, `holm-bonferroni` or `benjamini-hochberg`: D36's names, as in the catalog.
    pub const fn as_str(self) -> &'static str {
        match self {
            Correction::None => "none",
            Correction::HolmBonferroni => "holm-bonferroni",
            Correction::BenjaminiHochberg => "benjamini-hochberg",
        }
    }

    /// The adjusted p-values of a family, in the order of `p_values`: for [`Correction::None`]
    /// the p-values themselves, otherwise [`holm_bonferroni`] or [`benjamini_hochberg`].
    pub fn adjust(self, p_values: &[f64]) -> Vec<f64> {
        match self {
            Correction::None => p_values.to_vec(),
            Correction::HolmBonferroni => holm_bonferroni(p_values),
            Correction::BenjaminiHochberg => benjamini_hochberg(p_values),
        }
    }
}

/// Holm-Bonferroni adjusted p-values of a family, in the order of `p_values`: statsmodels'
/// `multipletests(p_values, method="holm")[1]`, with NaN left out of the family and kept NaN.
pub fn holm_bonferroni(p_values: &[f64]) -> Vec<f64> {
    let (order, mut adjusted) = sorted_family(p_values);
    let m = order.len();
    let mut highest = f64::NEG_INFINITY;
    for (k, &i) in order.iter().enumerate() {
        // statsmodels' `np.maximum.accumulate(p * arange(m, 0, -1))`, then the cap at 1.
        highest = highest.max(p_values[i] * (m - k) as f64);
        adjusted[i] = highest.min(1.0);
    }
    adjusted
}

/// Benjamini-Hochberg adjusted p-values of a family, in the order of `p_values`: statsmodels'
/// `multipletests(p_values, method="fdr_bh")[1]`, with NaN left out of the family and kept NaN.
pub fn benjamini_hochberg(p_values: &[f64]) -> Vec<f64> {
    let (order, mut adjusted) = sorted_family(p_values);
    let m = order.len() as f64;
    let mut lowest = f64::INFINITY;
    for (k, &i) in order.iter().enumerate().rev() {
        // statsmodels divides by its empirical distribution function `arange(1, m + 1) / m`,
        // then takes the running minimum from the largest p-value down, then caps at 1.
        let ecdf = (k + 1) as f64 / m;
        lowest = lowest.min(p_values[i] / ecdf);
        adjusted[i] = lowest.min(1.0);
    }
    adjusted
}

/// The indices of the family's members (every p-value but NaN) sorted by p-value, and a result
/// of NaN everywhere for the caller to fill in.
fn sorted_family(p_values: &[f64]) -> (Vec<usize>, Vec<f64>) {
    let mut order: Vec<usize> = (0..p_values.len())
        .filter(|&i| !p_values[i].is_nan())
        .collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    (order, vec![f64::NAN; p_values.len()])
}

/// GrowthBook's ad-hoc interval for an adjusted p-value (see the [module](self) documentation):
/// `interval` is the comparison's `1 - alpha` confidence interval of `lift`, and
/// `adjusted_p_value` its p-value after the family's correction.
///
/// Returns `(f64::NEG_INFINITY, f64::INFINITY)` when the adjusted p-value is above
/// [`UNBOUNDED_ABOVE`], the interval `lift ± z(1 - alpha / 2) · |lift / z(1 - p / 2)|` when
/// it is wider than `interval` on both sides, and `interval` otherwise, which includes a
/// `lift` of 0 or NaN, an adjusted p-value of NaN or below 0, and an `alpha` outside `(0, 1)`.
pub fn adjusted_interval(
    lift: f64,
    interval: (f64, f64),
    adjusted_p_value: f64,
    alpha: f64,
) -> (f64, f64) {
    if adjusted_p_value > UNBOUNDED_ABOVE {
        return (f64::NEG_INFINITY, f64::INFINITY);
    }
    // Also keeps the quantiles below within `[0, 1]`, where statrs answers without panicking.
    let computable =
        lift != 0.0 && !lift.is_nan() && adjusted_p_value >= 0.0 && alpha > 0.0 && alpha < 1.0;
    if !computable {
        return interval;
    }
    let normal = Normal::standard();
    let z = normal.inverse_cdf(1.0 - alpha / 2.0);
    // An adjusted p-value so small that `1 - p / 2` rounds to 1 has a quantile of infinity:
    // a standard deviation of 0, an interval of width 0, never wider, so `interval` stays.
    let sd = (lift / normal.inverse_cdf(1.0 - adjusted_p_value / 2.0)).abs();
    let half = z * sd;
    let (low, high) = (lift - half, lift + half);
    if low < interval.0 && high > interval.1 {
        (low, high)
    } else {
        interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_d36s() {
        for (correction, name) in [
            (Correction::None, "none"),
            (Correction::HolmBonferroni, "holm-bonferroni"),
            (Correction::BenjaminiHochberg, "benjamini-hochberg"),
        ] {
            assert_eq!(correction.as_str(), name);
            let json = serde_json::to_string(&correction).unwrap_or_default();
            assert_eq!(json, format!("\"{name}\""));
            let parsed: Result<Correction, _> = serde_json::from_str(&json);
            assert_eq!(parsed.ok(), Some(correction));
        }
        assert!(serde_json::from_str::<Correction>("\"holm\"").is_err());
        assert_eq!(Correction::default(), Correction::None);
    }

    #[test]
    fn none_leaves_the_p_values_as_they_are() {
        let p = [0.01, f64::NAN, 0.5];
        let adjusted = Correction::None.adjust(&p);
        assert_eq!(adjusted[0], 0.01);
        assert!(adjusted[1].is_nan());
        assert_eq!(adjusted[2], 0.5);
    }

    #[test]
    fn nan_is_left_out_of_the_family() {
        // Without its NaN, the family is [0.01, 0.04]: Holm gives 0.02 and 0.04.
        let adjusted = holm_bonferroni(&[f64::NAN, 0.01, 0.04]);
        assert!(adjusted[0].is_nan());
        assert_eq!(&adjusted[1..], &[0.02, 0.04]);
        assert!(benjamini_hochberg(&[f64::NAN]).iter().all(|p| p.is_nan()));
        assert!(holm_bonferroni(&[]).is_empty());
    }

    #[test]
    fn intervals_never_panic_outside_their_domain() {
        let ci = (0.01, 0.09);
        for (p, alpha) in [
            (-0.5, 0.05),
            (f64::NAN, 0.05),
            (0.2, 0.0),
            (0.2, 1.0),
            (0.2, -1.0),
        ] {
            assert_eq!(adjusted_interval(0.05, ci, p, alpha), ci, "{p} {alpha}");
        }
        assert_eq!(adjusted_interval(f64::NAN, ci, 0.2, 0.05), ci);
        let unbounded = adjusted_interval(0.05, ci, 1.0, 0.05);
        assert_eq!(unbounded, (f64::NEG_INFINITY, f64::INFINITY));
    }
}
