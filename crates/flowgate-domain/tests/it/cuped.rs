//! Ratio metrics and CUPED (D36) against their golden vectors (`tests/data/cuped/`, README
//! there): every case's comparisons, fixed-horizon and sequential, relative and absolute,
//! computed by gbstats 0.8.0's own `RatioStatistic` and `RegressionAdjustedStatistic`. Every
//! failure names its case.

use flowgate_domain::results::statistic::{
    compare_cuped, compare_ratio, CupedSums, Difference, EffectEstimate, RatioKinds, RatioSums,
};
use flowgate_domain::results::{Method, MetricKind, NoEstimate, SequentialConfig};
use serde_json::Value;

const VECTORS: &str = include_str!("../data/cuped/vectors.json");

/// Relative agreement asked of every figure. The sums are taken apart in gbstats' order, so the
/// effect, its standard error and `θ` agree to a few units in the last place; the p-value and
/// the fixed-horizon interval go through Student's t, statrs' here and SciPy's there, which
/// agree to about 1e-12 relative in these cases (see `FLOOR` for what is compared below that).
const RELATIVE: f64 = 1e-9;

/// Below this, figures are compared absolutely: a p-value is `1 - cdf` in both engines, so
/// each carries an absolute rounding error of about 1e-16 whatever its size.
const FLOOR: f64 = 1e-14;

fn vectors() -> Value {
    serde_json::from_str(VECTORS).expect("vectors.json parses")
}

fn number(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is a number"))
}

fn kind(name: &str) -> MetricKind {
    match name {
        "conversion" => MetricKind::Conversion,
        "mean" => MetricKind::Mean,
        other => panic!("an unknown kind {other}"),
    }
}

fn method(v: &Value) -> Method {
    match v["test"].as_str() {
        Some("fixed_horizon") => Method::FixedHorizon,
        Some("sequential") => Method::Sequential(
            SequentialConfig::new(number(v, "tuning"), number(v, "alpha")).expect("a config"),
        ),
        other => panic!("an unknown test {other:?}"),
    }
}

fn difference(v: &Value) -> Difference {
    match v.as_str() {
        Some("relative") => Difference::Relative,
        Some("absolute") => Difference::Absolute,
        other => panic!("an unknown difference {other:?}"),
    }
}

fn ratio_sums(v: &Value) -> RatioSums {
    RatioSums {
        users: v["users"].as_u64().expect("users"),
        numerator: number(v, "numerator"),
        numerator_squares: number(v, "numerator_squares"),
        denominator: number(v, "denominator"),
        denominator_squares: number(v, "denominator_squares"),
        products: number(v, "products"),
    }
}

fn cuped_sums(v: &Value) -> CupedSums {
    CupedSums {
        users: v["users"].as_u64().expect("users"),
        metric: number(v, "metric"),
        metric_squares: number(v, "metric_squares"),
        covariate: number(v, "covariate"),
        covariate_squares: number(v, "covariate_squares"),
        products: number(v, "products"),
    }
}

/// What the comparisons of the vectors add up to.
#[derive(Default)]
struct Tally {
    comparisons: usize,
    values: usize,
    no_estimate: usize,
    largest: f64,
    failed: Vec<String>,
}

impl Tally {
    /// Compares one figure: an interval's bound is compared relative to the larger of itself
    /// and the interval's half-width, since a bound near 0 is the difference of two close
    /// numbers and carries their error, not its own.
    fn figure(&mut self, what: String, ours: f64, theirs: f64, scale: f64) {
        self.values += 1;
        let off = if ours == theirs {
            0.0
        } else {
            (ours - theirs).abs() / theirs.abs().max(scale).max(FLOOR)
        };
        self.largest = self.largest.max(off);
        if off.is_nan() || off > RELATIVE {
            self.failed.push(format!(
                "{what}: ours {ours:e}, gbstats {theirs:e} ({off:e})"
            ));
        }
    }

    /// One comparison: gbstats' figures or its reason for none against ours.
    fn compare(
        &mut self,
        what: &str,
        expected: &Value,
        ours: Result<EffectEstimate, NoEstimate>,
        empty_arm: bool,
    ) {
        self.comparisons += 1;
        if let Some(error) = expected["error"].as_str() {
            self.no_estimate += 1;
            self.values += 1;
            let reason = match error {
                "ZERO_NEGATIVE_BASELINE_VARIATION" => NoEstimate::ControlMeanZero,
                // gbstats' t-tests see an arm without users as one of variance 0.
                "ZERO_NEGATIVE_VARIANCE" if empty_arm => NoEstimate::NoUsers,
                "ZERO_NEGATIVE_VARIANCE" => NoEstimate::ZeroVariance,
                "OverflowError" => NoEstimate::Overflow,
                other => {
                    panic!("{what}: a gbstats error the vectors were not expected to hold: {other}")
                }
            };
            if ours != Err(reason) {
                self.failed
                    .push(format!("{what}: ours {ours:?}, gbstats {error}"));
            }
            return;
        }
        let ours = match ours {
            Ok(estimate) => estimate,
            Err(no) => {
                self.values += 1;
                self.failed
                    .push(format!("{what}: ours {no:?}, gbstats an estimate"));
                return;
            }
        };
        let theirs = |k: &str| number(expected, k);
        let ci = |i: usize| expected["ci"][i].as_f64().expect("a bound");
        let half = (ci(1) - ci(0)) / 2.0;
        self.figure(format!("{what} effect"), ours.effect, theirs("effect"), 0.0);
        self.figure(
            format!("{what} std_error"),
            ours.std_error,
            theirs("std_error"),
            0.0,
        );
        self.figure(format!("{what} ci_low"), ours.ci_low, ci(0), half);
        self.figure(format!("{what} ci_high"), ours.ci_high, ci(1), half);
        self.figure(
            format!("{what} p_value"),
            ours.p_value,
            theirs("p_value"),
            0.0,
        );
    }
}

#[test]
fn conformance_ratio_metrics_agree_with_gbstats() {
    let vectors = vectors();
    let cases = vectors["ratio"].as_array().expect("ratio");
    let mut tally = Tally::default();
    for case in cases {
        let kinds = RatioKinds {
            numerator: kind(case["numerator"].as_str().expect("numerator")),
            denominator: kind(case["denominator"].as_str().expect("denominator")),
        };
        let (a, b) = (ratio_sums(&case["control"]), ratio_sums(&case["treatment"]));
        for expected in case["comparisons"].as_array().expect("comparisons") {
            let (m, d) = (
                method(&expected["method"]),
                difference(&expected["difference"]),
            );
            let what = format!("{} ({}, {})", case["name"], m.as_str(), d.as_str());
            let empty = a.users == 0 || b.users == 0;
            tally.compare(&what, expected, compare_ratio(kinds, &a, &b, d, &m), empty);
        }
    }
    println!(
        "ratio metrics: {} cases, {} comparisons ({} without an estimate), {} of {} values \
         agree with gbstats; largest relative difference {:e}",
        cases.len(),
        tally.comparisons,
        tally.no_estimate,
        tally.values - tally.failed.len(),
        tally.values,
        tally.largest
    );
    assert!(tally.failed.is_empty(), "{}", tally.failed.join("\n"));
    assert!(cases.len() >= 60, "the vectors hold {} cases", cases.len());
}

#[test]
fn conformance_cuped_agrees_with_gbstats() {
    let vectors = vectors();
    let cases = vectors["cuped"].as_array().expect("cuped");
    let mut tally = Tally::default();
    let mut fallbacks = 0;
    for case in cases {
        let kind = kind(case["kind"].as_str().expect("kind"));
        let (a, b) = (cuped_sums(&case["control"]), cuped_sums(&case["treatment"]));
        for expected in case["comparisons"].as_array().expect("comparisons") {
            let (m, d) = (
                method(&expected["method"]),
                difference(&expected["difference"]),
            );
            let what = format!("{} ({}, {})", case["name"], m.as_str(), d.as_str());
            let ours = compare_cuped(kind, &a, &b, d, &m);
            if let (Ok(ours), Some(theta)) = (&ours, expected["theta"].as_f64()) {
                if expected.get("error").is_none() {
                    tally.figure(format!("{what} theta"), ours.theta, theta, 0.0);
                    if ours.adjusted != (theta != 0.0) {
                        tally.failed.push(format!(
                            "{what}: adjusted {}, gbstats θ {theta}",
                            ours.adjusted
                        ));
                    }
                    fallbacks += usize::from(!ours.adjusted);
                }
            }
            let empty = a.users == 0 || b.users == 0;
            tally.compare(&what, expected, ours.map(|c| c.estimate), empty);
        }
    }
    println!(
        "CUPED: {} cases, {} comparisons ({} without an estimate, {fallbacks} unadjusted for \
         θ = 0), {} of {} values agree with gbstats; largest relative difference {:e}",
        cases.len(),
        tally.comparisons,
        tally.no_estimate,
        tally.values - tally.failed.len(),
        tally.values,
        tally.largest
    );
    assert!(tally.failed.is_empty(), "{}", tally.failed.join("\n"));
    assert!(cases.len() >= 60, "the vectors hold {} cases", cases.len());
}

#[test]
fn the_vectors_reach_every_case_they_promise() {
    let vectors = vectors();
    let all: Vec<&Value> = ["ratio", "cuped"]
        .iter()
        .flat_map(|s| vectors[*s].as_array().expect("a section"))
        .flat_map(|c| c["comparisons"].as_array().expect("comparisons"))
        .collect();
    let count = |f: &dyn Fn(&Value) -> bool| all.iter().filter(|c| f(c)).count();
    let error = |e: &'static str| move |c: &Value| c["error"].as_str() == Some(e);
    assert!(count(&error("ZERO_NEGATIVE_VARIANCE")) >= 8);
    assert!(count(&error("ZERO_NEGATIVE_BASELINE_VARIATION")) >= 8);
    assert!(count(&error("OverflowError")) >= 4);
    assert!(count(&|c| c["theta"].as_f64() == Some(0.0)) >= 8);
    assert!(count(&|c| c["theta"].as_f64().is_some_and(|t| t < 0.0)) >= 4);
    assert!(count(&|c| c["effect"].as_f64().is_some_and(|e| e < 0.0)) >= 40);
    assert!(count(&|c| c["difference"] == "absolute" && c.get("effect").is_some()) >= 200);
    assert!(count(&|c| c["method"]["test"] == "sequential" && c.get("effect").is_some()) >= 200);
}
