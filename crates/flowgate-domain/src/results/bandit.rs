//! Multi-armed-bandit weight updates, as GrowthBook computes them (D37).
//!
//! A bandit experiment moves its variants' weights each period towards the arms most likely to
//! be best. [`update`] is one period's update, from the users, sums and sums of squares of the
//! primary metric per period and per arm; it is pure: the caller reads the sums from the store
//! and applies the weights it returns. The steps are GrowthBook's (its back-end's SQL and
//! gbstats' `Bandits`, at commit `8f1db445`, `tests/data/growthbook-bandits/README.md`):
//!
//! 1. **Periods** ([`reduce_periods`]): each user counts in the period of their first exposure;
//!    a period weighs its share of all users, and each arm collapses to one row whose mean is
//!    the weighted sum of its per-period means and whose variance of the mean is the sum of the
//!    squared weights times the per-period variances of the mean. A cell without users adds
//!    nothing, so an arm missing from a period has weights summing to less than 1.
//! 2. **Posterior** ([`posterior`]): a normal prior of mean 0 and variance [`PRIOR_VARIANCE`],
//!    updated with the arm's mean and its precision `users / sample variance`. An arm whose
//!    values do not vary (no conversions, or every user converted) has precision 0 and keeps
//!    the prior: GrowthBook treats it as having no data, and so do we.
//! 3. **Probability of being best** ([`rank_probabilities`]): GrowthBook draws 10,000 samples
//!    of the posteriors; we integrate the same independent normals numerically instead, so the
//!    figures are exact (to about 1e-10), deterministic and need no seed. GrowthBook's sampled
//!    figures lie within its Monte Carlo noise (at most 0.005) of ours.
//! 4. **Allocation** ([`allocation`]): the probabilities of being best (Thompson sampling; lower
//!    is better for an inverse metric), or with `top_two` the mean of the chances of ranking
//!    first and second.
//! 5. **Minimum weight** ([`apply_floor`]): GrowthBook's additive simplex floor, `f + (1 − K·f)
//!    · a_i / Σa` for `K` arms, or uniform weights when `K·f ≥ 1`.
//! 6. **Minimum users**: new weights exist only when every arm has [`MIN_USERS_PER_ARM`] users
//!    across all periods; until then the weights in force stay.
//!
//! Each step is public so that a caller (or a test) can start from any layer; [`update`] runs
//! them all and returns a [`BanditUpdate`], the record GrowthBook stores for an update (without
//! its `seed`, which only names a sample: nothing here is drawn).
//!
//! ```
//! use flowgate_domain::results::bandit::{update, BanditSettings, UpdateStatus};
//! use flowgate_domain::results::VariantSums;
//!
//! let cell = |users, conversions: f64| VariantSums { users, sum: conversions, sum_squares: conversions };
//! // One period, two arms: 5% and 7% conversion on 5,000 users each.
//! let periods = vec![vec![cell(5000, 250.0), cell(5000, 350.0)]];
//! let result = update(&periods, &[0.5, 0.5], &BanditSettings::default())?;
//! assert_eq!(result.status, UpdateStatus::Updated);
//! assert!(result.best_arm_probabilities[1] > 0.9999);
//! // The floor keeps 1% for the losing arm.
//! assert!((result.updated_weights[0] - 0.01).abs() < 1e-4);
//! # Ok::<(), flowgate_domain::results::bandit::BanditError>(())
//! ```

use statrs::distribution::{ContinuousCDF, Normal};
use statrs::function::erf::erfc;

use super::stats::VariantSums;

/// The prior's mean: every arm starts at 0.
pub const PRIOR_MEAN: f64 = 0.0;
/// The prior's variance: proper but wide (GrowthBook's bandit prior).
pub const PRIOR_VARIANCE: f64 = 1e4;
/// `1 / PRIOR_VARIANCE`.
pub const PRIOR_PRECISION: f64 = 1e-4;
/// The users every arm needs, over all periods, before weights move (hard-coded in gbstats).
pub const MIN_USERS_PER_ARM: u64 = 100;
/// The default minimum weight of an arm, GrowthBook's (the back-end never sends another).
pub const DEFAULT_MIN_WEIGHT: f64 = 0.01;
/// The default interval level: bounds at the 2.5% and 97.5% quantiles.
pub const DEFAULT_ALPHA: f64 = 0.05;

/// How an update weighs the arms. [`Default`] is what GrowthBook's back-end runs in
/// production: floor [`DEFAULT_MIN_WEIGHT`], plain Thompson sampling, higher is better,
/// weights applied.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BanditSettings {
    /// The floor `f` every arm keeps; a negative value counts as 0 (as in gbstats).
    pub min_weight: f64,
    /// The interval level of [`BanditArm`]: bounds at `alpha / 2` and `1 − alpha / 2`.
    pub alpha: f64,
    /// Lower is better (a metric such as seconds to checkout).
    pub inverse: bool,
    /// Top-two Thompson sampling instead of plain (GrowthBook's back-end never turns it on).
    pub top_two: bool,
    /// Whether the new weights replace the current ones ([`BanditUpdate::updated_weights`]).
    pub reweight: bool,
}

impl Default for BanditSettings {
    fn default() -> Self {
        Self {
            min_weight: DEFAULT_MIN_WEIGHT,
            alpha: DEFAULT_ALPHA,
            inverse: false,
            top_two: false,
            reweight: true,
        }
    }
}

/// Why an update cannot be computed. Negative user counts cannot be expressed at all
/// ([`VariantSums::users`] is unsigned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BanditError {
    /// There are no arms (no current weights).
    #[error("a bandit needs at least one arm")]
    NoArms,
    /// A period does not have one cell per arm.
    #[error("period {period} has {cells} cells for {arms} arms")]
    ArmCount {
        /// The period's index.
        period: usize,
        /// Its number of cells.
        cells: usize,
        /// The number of arms (current weights).
        arms: usize,
    },
    /// A sum or a sum of squares is not a finite number, or a figure computed from the sums
    /// left the float range.
    #[error("arm {arm}: a sum, or a figure computed from the sums, is not a finite number")]
    NotFinite {
        /// The arm's index.
        arm: usize,
    },
    /// A sum of squares is negative, or a cell without users has non-zero sums.
    #[error("arm {arm}: its sums cannot come from any set of users")]
    ImpossibleSums {
        /// The arm's index.
        arm: usize,
    },
    /// A current weight is negative or not a finite number.
    #[error("arm {arm}: its current weight is negative or not a finite number")]
    InvalidWeight {
        /// The arm's index.
        arm: usize,
    },
    /// The minimum weight is not a number or infinite.
    #[error("the minimum weight is not a finite number")]
    InvalidMinWeight,
    /// `alpha` is not strictly between 0 and 1.
    #[error("alpha must be strictly between 0 and 1")]
    InvalidAlpha,
    /// An allocation given to [`apply_floor`] has a negative or non-finite share, or sums to 0.
    #[error("an allocation needs non-negative finite shares with a positive sum")]
    InvalidAllocation,
    /// Top-two sampling of an inverse metric with fewer than 3 arms: gbstats fails here (an
    /// `IndexError`, as it ranks the 2nd and 3rd smallest draws), and so does this.
    #[error("top-two sampling of an inverse metric needs at least 3 arms, as in gbstats")]
    InverseTopTwoNeedsThreeArms,
}

impl BanditError {
    /// A stable machine-readable code.
    pub const fn code(self) -> &'static str {
        match self {
            BanditError::NoArms => "no_arms",
            BanditError::ArmCount { .. } => "arm_count",
            BanditError::NotFinite { .. } => "not_finite",
            BanditError::ImpossibleSums { .. } => "impossible_sums",
            BanditError::InvalidWeight { .. } => "invalid_weight",
            BanditError::InvalidMinWeight => "invalid_min_weight",
            BanditError::InvalidAlpha => "invalid_alpha",
            BanditError::InvalidAllocation => "invalid_allocation",
            BanditError::InverseTopTwoNeedsThreeArms => "inverse_top_two_needs_three_arms",
        }
    }
}

/// The arms' rows after the period weighting (step 1), as GrowthBook's SQL hands them to
/// gbstats.
#[derive(Clone, Debug, PartialEq)]
pub struct PeriodReduction {
    /// Each period's share of all users, over all arms.
    pub period_weights: Vec<f64>,
    /// Per arm: all its users, and a sum and sum of squares rebuilt so that their mean is the
    /// weighted mean and their sample variance over the users is the users times the weighted
    /// variance of the mean. All zero for an arm without users (GrowthBook's SQL has no row).
    pub arms: Vec<VariantSums>,
}

/// Collapses `periods[p][v]` (users first exposed in period `p`, arm `v`) into one row per
/// arm, weighting each period by its share of all users (step 1 of the module's list).
///
/// `arms` is the number of arms; every period must have that many cells.
pub fn reduce_periods(
    periods: &[Vec<VariantSums>],
    arms: usize,
) -> Result<PeriodReduction, BanditError> {
    if arms == 0 {
        return Err(BanditError::NoArms);
    }
    for (p, period) in periods.iter().enumerate() {
        if period.len() != arms {
            return Err(BanditError::ArmCount {
                period: p,
                cells: period.len(),
                arms,
            });
        }
        for (arm, cell) in period.iter().enumerate() {
            check_sums(cell, arm)?;
        }
    }
    // Counts as floats, as the SQL adds them: a u64 total could overflow, a float cannot.
    let period_users: Vec<f64> = periods
        .iter()
        .map(|period| period.iter().map(|c| c.users as f64).sum())
        .collect();
    let total: f64 = period_users.iter().sum();
    let period_weights: Vec<f64> = period_users.iter().map(|u| u / total).collect();
    let rows = (0..arms)
        .map(|arm| reduce_arm(periods, &period_weights, arm))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PeriodReduction {
        period_weights,
        arms: rows,
    })
}

/// One arm's row: the operations in the order of GrowthBook's SQL (and of the vectors'
/// generator), since a constant arm's variance is 0 only when the rounding cancels exactly.
fn reduce_arm(
    periods: &[Vec<VariantSums>],
    weights: &[f64],
    arm: usize,
) -> Result<VariantSums, BanditError> {
    let mut users: u64 = 0;
    let mut mean = 0.0;
    let mut variance_of_mean = 0.0;
    for (cell, w) in periods.iter().map(|p| &p[arm]).zip(weights) {
        if cell.users == 0 {
            continue;
        }
        users = users
            .checked_add(cell.users)
            .ok_or(BanditError::NotFinite { arm })?;
        let m = cell.users as f64;
        mean += w * cell.sum / m;
        if cell.users > 1 {
            let cell_variance = (cell.sum_squares - cell.sum * cell.sum / m) / (m - 1.0);
            variance_of_mean += w * w * cell_variance / m;
        }
    }
    if users == 0 {
        return Ok(VariantSums::default());
    }
    let n = users as f64;
    let row = VariantSums {
        users,
        sum: mean * n,
        sum_squares: n * (variance_of_mean * (n - 1.0) + mean * mean),
    };
    if row.sum.is_finite() && row.sum_squares.is_finite() {
        Ok(row)
    } else {
        Err(BanditError::NotFinite { arm })
    }
}

fn check_sums(cell: &VariantSums, arm: usize) -> Result<(), BanditError> {
    if !cell.sum.is_finite() || !cell.sum_squares.is_finite() {
        return Err(BanditError::NotFinite { arm });
    }
    if cell.sum_squares < 0.0 || (cell.users == 0 && (cell.sum != 0.0 || cell.sum_squares != 0.0)) {
        return Err(BanditError::ImpossibleSums { arm });
    }
    Ok(())
}

/// One arm's data and normal posterior (step 2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArmPosterior {
    /// All the arm's users.
    pub users: u64,
    /// `sum / users`; 0 without users.
    pub data_mean: f64,
    /// The sample variance `(sum_squares − sum² / users) / (users − 1)`; 0 with at most one
    /// user.
    pub data_variance: f64,
    /// `users / data_variance`, or 0 when the variance is not positive: an arm whose values
    /// do not vary counts as having no data (GrowthBook's rule).
    pub data_precision: f64,
    /// The posterior mean.
    pub mean: f64,
    /// The posterior variance, `1 / (PRIOR_PRECISION + data_precision)`.
    pub variance: f64,
}

/// The posterior of an arm from its (period-weighted) row, as gbstats' bandit computes it:
/// a conversion is read as a mean, so the variance is always the sample variance.
pub fn posterior(arm: &VariantSums) -> ArmPosterior {
    let n = arm.users as f64;
    let data_mean = if arm.users == 0 { 0.0 } else { arm.sum / n };
    let data_variance = if arm.users <= 1 {
        0.0
    } else {
        (arm.sum_squares - arm.sum * arm.sum / n) / (n - 1.0)
    };
    let data_precision = if data_variance > 0.0 {
        n / data_variance
    } else {
        0.0
    };
    let variance = 1.0 / (PRIOR_PRECISION + data_precision);
    // The prior mean is 0, so it adds nothing to the precision-weighted mean.
    let mean = variance * (PRIOR_PRECISION * PRIOR_MEAN + data_precision * data_mean);
    ArmPosterior {
        users: arm.users,
        data_mean,
        data_variance,
        data_precision,
        mean,
        variance,
    }
}

/// `ranks[k][m]`: the probability that exactly `m` other arms draw a higher value than arm
/// `k`, for independent normal posteriors (higher first, whatever the metric's direction).
/// `ranks[k][0]` is arm `k`'s chance of being highest; each row and each column sums to 1.
///
/// Computed by Gauss–Legendre quadrature over arm `k`'s density, of the polynomial
/// `Π_{j≠k} (P(X_j < x) + P(X_j > x)·z)` whose coefficient `m` is the wanted probability. The
/// axis is cut at every arm's mean and at fixed multiples of its standard deviation up to
/// ±10, so each piece is smooth at the scale of every arm, however different their widths
/// (the prior's is 10⁴ times a typical arm's). Accurate to about 1e-10. The cost grows as `K²`
/// to `K³` in the number of arms `K`: about 0.5 ms for 5 arms and 15 ms for 20 (release build).
pub fn rank_probabilities(posteriors: &[ArmPosterior]) -> Vec<Vec<f64>> {
    let k = posteriors.len();
    let arms: Vec<(f64, f64)> = posteriors
        .iter()
        .map(|p| (p.mean, p.variance.sqrt()))
        .collect();
    let mut ranks = vec![vec![0.0; k]; k];
    // An arm without spread (an overflowed precision) is a point: no integral, its ranks are
    // the polynomial at its mean.
    for (i, &(mean, sd)) in arms.iter().enumerate() {
        if sd == 0.0 {
            let tails: Vec<(f64, f64)> = arms.iter().map(|&a| tails(a, mean)).collect();
            rank_polynomial(&tails, i, &mut ranks[i]);
        }
    }
    let cuts = cut_points(&arms);
    let (nodes, weights) = gauss_legendre(QUADRATURE_NODES);
    let mut tails_at = vec![(0.0, 0.0); k];
    let mut polynomial = vec![0.0; k];
    for piece in cuts.windows(2) {
        let (a, b) = (piece[0], piece[1]);
        let (half, mid) = ((b - a) / 2.0, (a + b) / 2.0);
        for (t, w) in nodes.iter().zip(&weights) {
            let x = mid + half * t;
            for (slot, &arm) in tails_at.iter_mut().zip(&arms) {
                *slot = tails(arm, x);
            }
            for (i, &(mean, sd)) in arms.iter().enumerate() {
                if sd == 0.0 {
                    continue;
                }
                let z = (x - mean) / sd;
                // An arm's mass beyond 12 standard deviations (4e-33) adds nothing.
                if z.abs() > 12.0 {
                    continue;
                }
                let density = (-0.5 * z * z).exp() / (sd * SQRT_2PI);
                let scale = w * half * density;
                rank_polynomial(&tails_at, i, &mut polynomial);
                for (r, c) in ranks[i].iter_mut().zip(&polynomial) {
                    *r += scale * c;
                }
            }
        }
    }
    ranks
}

const SQRT_2PI: f64 = 2.506_628_274_631_000_5;
/// Nodes per piece of the axis: with the cuts of [`cut_points`], 16 nodes reach 1e-10.
const QUADRATURE_NODES: usize = 16;
/// Where an arm's axis is cut, in standard deviations from its mean.
const CUTS: [f64; 11] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0];

/// `(P(X < x), P(X > x))` for `X` normal with `(mean, sd)`, each from its own tail so that
/// neither loses precision to `1 − p`; a point when `sd` is 0 (a tie is not above).
fn tails((mean, sd): (f64, f64), x: f64) -> (f64, f64) {
    if sd == 0.0 {
        return if mean > x { (0.0, 1.0) } else { (1.0, 0.0) };
    }
    let z = (x - mean) / (sd * std::f64::consts::SQRT_2);
    (0.5 * erfc(-z), 0.5 * erfc(z))
}

/// The coefficients of `Π_{j≠k} (below_j + above_j·z)`, written into `coefficients` (one per
/// arm).
fn rank_polynomial(tails: &[(f64, f64)], k: usize, coefficients: &mut [f64]) {
    coefficients.fill(0.0);
    coefficients[0] = 1.0;
    let mut degree = 0;
    for (j, &(below, above)) in tails.iter().enumerate() {
        if j == k {
            continue;
        }
        degree += 1;
        for m in (1..=degree).rev() {
            coefficients[m] = coefficients[m] * below + coefficients[m - 1] * above;
        }
        coefficients[0] *= below;
    }
}

/// Where the axis is cut: at each arm's [`CUTS`], merged where arms overlap so that no two
/// cuts are closer than a quarter of the narrowest arm's standard deviation (with many similar
/// arms the pieces would otherwise be needlessly fine: the cost stays near `K²`, not `K⁴`),
/// and at each point arm's mean, where the others' polynomial jumps.
fn cut_points(arms: &[(f64, f64)]) -> Vec<f64> {
    let narrowest = arms
        .iter()
        .map(|a| a.1)
        .filter(|sd| *sd > 0.0)
        .fold(f64::INFINITY, f64::min);
    let mut smooth: Vec<f64> = arms
        .iter()
        .filter(|a| a.1 > 0.0)
        .flat_map(|&(mean, sd)| {
            CUTS.iter()
                .flat_map(move |c| [mean - c * sd, mean + c * sd])
        })
        .collect();
    smooth.sort_by(f64::total_cmp);
    let mut cuts: Vec<f64> = Vec::with_capacity(smooth.len());
    for x in smooth {
        if cuts.last().is_none_or(|last| x - last >= narrowest / 4.0) {
            cuts.push(x);
        }
    }
    cuts.extend(arms.iter().filter(|a| a.1 == 0.0).map(|a| a.0));
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    cuts
}

/// The nodes and weights of `n`-point Gauss–Legendre quadrature on `[-1, 1]`: the roots of the
/// Legendre polynomial `P_n` by Newton's method from the usual cosine guesses.
fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut nodes = vec![0.0; n];
    let mut weights = vec![0.0; n];
    let nf = n as f64;
    for i in 0..n.div_ceil(2) {
        let mut x = (std::f64::consts::PI * (i as f64 + 0.75) / (nf + 0.5)).cos();
        let mut derivative = 1.0;
        for _ in 0..100 {
            let (mut p0, mut p1) = (1.0, x);
            for j in 2..=n {
                let jf = j as f64;
                (p0, p1) = (p1, ((2.0 * jf - 1.0) * x * p1 - (jf - 1.0) * p0) / jf);
            }
            derivative = nf * (x * p1 - p0) / (x * x - 1.0);
            let step = p1 / derivative;
            x -= step;
            if step.abs() < 1e-16 {
                break;
            }
        }
        let weight = 2.0 / ((1.0 - x * x) * derivative * derivative);
        (nodes[i], nodes[n - 1 - i]) = (x, -x);
        (weights[i], weights[n - 1 - i]) = (weight, weight);
    }
    (nodes, weights)
}

/// Each arm's probability of being best: highest, or lowest for an `inverse` metric.
pub fn best_arm_probabilities(ranks: &[Vec<f64>], inverse: bool) -> Vec<f64> {
    let last = ranks.len().saturating_sub(1);
    ranks
        .iter()
        .map(|r| rank(r, if inverse { last } else { 0 }))
        .collect()
}

/// The allocation before the floor (step 4): the best-arm probabilities, or with `top_two`
/// the mean of the chances of ranking first and second.
///
/// For an inverse metric with `top_two`, gbstats takes the 2nd and 3rd smallest draws rather
/// than the 1st and 2nd, so the best arm gets the least; this reproduces it, and fails as
/// gbstats does with fewer than 3 arms. GrowthBook's back-end never turns top-two on.
pub fn allocation(
    ranks: &[Vec<f64>],
    inverse: bool,
    top_two: bool,
) -> Result<Vec<f64>, BanditError> {
    if !top_two {
        return Ok(best_arm_probabilities(ranks, inverse));
    }
    let k = ranks.len();
    // Positions counted from the highest draw.
    let (first, second) = if !inverse {
        (0, 1)
    } else if k >= 3 {
        (k - 2, k - 3)
    } else {
        return Err(BanditError::InverseTopTwoNeedsThreeArms);
    };
    Ok(ranks
        .iter()
        .map(|r| (rank(r, first) + rank(r, second)) / 2.0)
        .collect())
}

/// A rank's probability; a rank a malformed row lacks counts 0.
fn rank(row: &[f64], m: usize) -> f64 {
    row.get(m).copied().unwrap_or(0.0)
}

/// GrowthBook's minimum-weight rule, an additive simplex floor (step 5): with `f =
/// max(0, min_weight)` and `K` arms, `f + (1 − K·f) · a_i / Σa`, so every arm gets at least `f`
/// and the weights sum to 1; uniform weights when `K·f ≥ 1`.
pub fn apply_floor(allocation: &[f64], min_weight: f64) -> Result<Vec<f64>, BanditError> {
    if allocation.is_empty() {
        return Err(BanditError::NoArms);
    }
    if !min_weight.is_finite() {
        return Err(BanditError::InvalidMinWeight);
    }
    let k = allocation.len() as f64;
    let f = min_weight.max(0.0);
    if k * f >= 1.0 {
        return Ok(vec![1.0 / k; allocation.len()]);
    }
    let total: f64 = allocation.iter().sum();
    if allocation.iter().any(|a| !a.is_finite() || *a < 0.0) || total <= 0.0 {
        return Err(BanditError::InvalidAllocation);
    }
    Ok(allocation
        .iter()
        .map(|a| f + (1.0 - k * f) * a / total)
        .collect())
}

/// What an update did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpdateStatus {
    /// Every arm had its minimum users: new weights were computed.
    Updated,
    /// An arm had fewer than [`MIN_USERS_PER_ARM`] users: the weights in force stay.
    TooFewUsers,
}

impl UpdateStatus {
    /// `updated` or `too_few_users`.
    pub const fn code(self) -> &'static str {
        match self {
            UpdateStatus::Updated => "updated",
            UpdateStatus::TooFewUsers => "too_few_users",
        }
    }

    /// GrowthBook's `updateMessage`, word for word.
    pub const fn message(self) -> &'static str {
        match self {
            UpdateStatus::Updated => "successfully updated",
            UpdateStatus::TooFewUsers => "total sample size must be at least 100 per variation",
        }
    }
}

/// One arm in an update's record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BanditArm {
    /// The arm's data and posterior.
    pub posterior: ArmPosterior,
    /// The interval between the normal quantiles at `alpha / 2` and `1 − alpha / 2` with the
    /// posterior's standard deviation, centred (as in GrowthBook) on the data mean.
    pub interval: (f64, f64),
}

/// One period's update, the record GrowthBook stores for it (its `BanditResult`).
#[derive(Clone, Debug, PartialEq)]
pub struct BanditUpdate {
    /// The period weighting the arms' figures come from.
    pub reduction: PeriodReduction,
    /// Per arm: posterior and interval.
    pub arms: Vec<BanditArm>,
    /// Each arm's probability of being best, given even when an arm has too few users
    /// (GrowthBook computes them then too, but stores none).
    pub best_arm_probabilities: Vec<f64>,
    /// The allocation before the floor ([`allocation`]).
    pub allocation: Vec<f64>,
    /// The weights the update computed, after the floor; `None` with too few users.
    pub new_weights: Option<Vec<f64>>,
    /// The weights in force before the update.
    pub current_weights: Vec<f64>,
    /// The weights in force after it: the new ones when computed and `reweight` is on,
    /// otherwise the current ones.
    pub updated_weights: Vec<f64>,
    /// `reweight` is on and the weights changed (compared exactly, as GrowthBook does).
    pub weights_were_updated: bool,
    /// The settings' `reweight`.
    pub reweight: bool,
    /// Whether new weights were computed.
    pub status: UpdateStatus,
}

/// One period's update (D37) from the primary metric's sums per period and arm
/// (`periods[p][v]`: the users first exposed in period `p` to arm `v`) and the weights in
/// force, one per arm.
pub fn update(
    periods: &[Vec<VariantSums>],
    current_weights: &[f64],
    settings: &BanditSettings,
) -> Result<BanditUpdate, BanditError> {
    let reduction = reduce_periods(periods, current_weights.len())?;
    update_reduced(reduction, current_weights, settings)
}

/// [`update`] from rows already weighted by period (steps 2 to 6), for a caller whose store
/// does [`reduce_periods`]' arithmetic itself, as GrowthBook's SQL does.
pub fn update_reduced(
    reduction: PeriodReduction,
    current_weights: &[f64],
    settings: &BanditSettings,
) -> Result<BanditUpdate, BanditError> {
    let k = reduction.arms.len();
    if k == 0 {
        return Err(BanditError::NoArms);
    }
    if current_weights.len() != k {
        return Err(BanditError::ArmCount {
            period: 0,
            cells: k,
            arms: current_weights.len(),
        });
    }
    if let Some(arm) = current_weights
        .iter()
        .position(|w| !w.is_finite() || *w < 0.0)
    {
        return Err(BanditError::InvalidWeight { arm });
    }
    if !settings.min_weight.is_finite() {
        return Err(BanditError::InvalidMinWeight);
    }
    if settings.alpha.is_nan() || settings.alpha <= 0.0 || settings.alpha >= 1.0 {
        return Err(BanditError::InvalidAlpha);
    }
    let mut posteriors = Vec::with_capacity(k);
    for (arm, row) in reduction.arms.iter().enumerate() {
        check_sums(row, arm)?;
        let p = posterior(row);
        let figures = [p.data_mean, p.data_variance, p.data_precision, p.mean];
        if !figures.iter().all(|x| x.is_finite()) {
            return Err(BanditError::NotFinite { arm });
        }
        posteriors.push(p);
    }
    let ranks = rank_probabilities(&posteriors);
    let best_arm_probabilities = best_arm_probabilities(&ranks, settings.inverse);
    let allocation = allocation(&ranks, settings.inverse, settings.top_two)?;
    let enough = posteriors.iter().all(|p| p.users >= MIN_USERS_PER_ARM);
    let new_weights = if enough {
        Some(apply_floor(&allocation, settings.min_weight)?)
    } else {
        None
    };
    let updated_weights = match (&new_weights, settings.reweight) {
        (Some(w), true) => w.clone(),
        _ => current_weights.to_vec(),
    };
    let (low, high) = {
        let normal = Normal::standard();
        (
            normal.inverse_cdf(settings.alpha / 2.0),
            normal.inverse_cdf(1.0 - settings.alpha / 2.0),
        )
    };
    let arms = posteriors
        .into_iter()
        .map(|p| {
            let sd = p.variance.sqrt();
            BanditArm {
                posterior: p,
                interval: (p.data_mean + low * sd, p.data_mean + high * sd),
            }
        })
        .collect();
    Ok(BanditUpdate {
        reduction,
        arms,
        best_arm_probabilities,
        allocation,
        weights_were_updated: settings.reweight && updated_weights != current_weights,
        new_weights,
        current_weights: current_weights.to_vec(),
        updated_weights,
        reweight: settings.reweight,
        status: if enough {
            UpdateStatus::Updated
        } else {
            UpdateStatus::TooFewUsers
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(users: u64, sum: f64, sum_squares: f64) -> VariantSums {
        VariantSums {
            users,
            sum,
            sum_squares,
        }
    }

    #[test]
    fn gauss_legendre_integrates_polynomials_exactly() {
        let (x, w) = gauss_legendre(QUADRATURE_NODES);
        // Degree 2n - 1 = 31 is exact: the integral of x^30 over [-1, 1] is 2/31.
        let integral: f64 = x.iter().zip(&w).map(|(x, w)| w * x.powi(30)).sum();
        assert!((integral - 2.0 / 31.0).abs() < 1e-14, "{integral}");
        assert!((w.iter().sum::<f64>() - 2.0).abs() < 1e-14);
    }

    #[test]
    fn two_equal_arms_are_best_half_the_time() {
        let p = posterior(&cell(1000, 100.0, 100.0));
        let ranks = rank_probabilities(&[p, p, p]);
        for row in &ranks {
            for r in row {
                assert!((r - 1.0 / 3.0).abs() < 1e-10, "{ranks:?}");
            }
        }
    }

    #[test]
    fn a_point_arm_is_ranked_at_its_mean() {
        let wide = ArmPosterior {
            users: 0,
            data_mean: 0.0,
            data_variance: 0.0,
            data_precision: 0.0,
            mean: 0.0,
            variance: 1.0,
        };
        let point = ArmPosterior {
            variance: 0.0,
            mean: 1.0,
            ..wide
        };
        let ranks = rank_probabilities(&[wide, point]);
        // P(N(0, 1) > 1) = 0.158655...
        assert!(
            (ranks[0][0] - 0.158_655_253_931_457).abs() < 1e-10,
            "{ranks:?}"
        );
        assert!(
            (ranks[1][0] - 0.841_344_746_068_543).abs() < 1e-10,
            "{ranks:?}"
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let ok = cell(500, 50.0, 50.0);
        let settings = BanditSettings::default();
        assert_eq!(
            update(&[], &[], &settings).unwrap_err(),
            BanditError::NoArms
        );
        assert_eq!(
            update(&[vec![ok]], &[0.5, 0.5], &settings)
                .unwrap_err()
                .code(),
            "arm_count"
        );
        let nan = cell(500, f64::NAN, 50.0);
        assert_eq!(
            update(&[vec![ok, nan]], &[0.5, 0.5], &settings).unwrap_err(),
            BanditError::NotFinite { arm: 1 }
        );
        let negative = cell(500, 50.0, -1.0);
        assert_eq!(
            update(&[vec![negative, ok]], &[0.5, 0.5], &settings).unwrap_err(),
            BanditError::ImpossibleSums { arm: 0 }
        );
        let ghost = cell(0, 3.0, 3.0);
        assert_eq!(
            update(&[vec![ok, ghost]], &[0.5, 0.5], &settings).unwrap_err(),
            BanditError::ImpossibleSums { arm: 1 }
        );
        assert_eq!(
            update(&[vec![ok, ok]], &[0.5, f64::NAN], &settings).unwrap_err(),
            BanditError::InvalidWeight { arm: 1 }
        );
        assert_eq!(
            update(&[vec![ok, ok]], &[1.5, -0.5], &settings).unwrap_err(),
            BanditError::InvalidWeight { arm: 1 }
        );
        let nan_floor = BanditSettings {
            min_weight: f64::NAN,
            ..settings
        };
        assert_eq!(
            update(&[vec![ok, ok]], &[0.5, 0.5], &nan_floor).unwrap_err(),
            BanditError::InvalidMinWeight
        );
        let alpha = BanditSettings {
            alpha: 1.0,
            ..settings
        };
        assert_eq!(
            update(&[vec![ok, ok]], &[0.5, 0.5], &alpha).unwrap_err(),
            BanditError::InvalidAlpha
        );
        let huge = cell(500, 1e300, 1e300);
        assert_eq!(
            update(&[vec![ok, huge]], &[0.5, 0.5], &settings).unwrap_err(),
            BanditError::NotFinite { arm: 1 }
        );
        assert_eq!(
            apply_floor(&[0.0, 0.0], 0.01).unwrap_err(),
            BanditError::InvalidAllocation
        );
        assert_eq!(apply_floor(&[], 0.01).unwrap_err(), BanditError::NoArms);
    }

    #[test]
    fn no_data_keeps_the_weights() {
        let result = update(&[], &[0.7, 0.3], &BanditSettings::default()).unwrap();
        assert_eq!(result.status, UpdateStatus::TooFewUsers);
        assert_eq!(result.updated_weights, vec![0.7, 0.3]);
        assert!(!result.weights_were_updated);
        assert!(result.new_weights.is_none());
        // Two arms at the prior: each is best half the time.
        assert!((result.best_arm_probabilities[0] - 0.5).abs() < 1e-10);
    }
}
