//! Corrections for many comparisons (D36) against their golden vectors
//! (`tests/data/corrections/`, README there): adjusted p-values written by statsmodels'
//! `multipletests`, adjusted intervals by GrowthBook's documented rule over gbstats' figures.

use flowgate_domain::results::correction::{adjusted_interval, Correction};
use serde_json::Value;

const VECTORS: &str = include_str!("../data/corrections/vectors.json");

/// Adjusted p-values follow statsmodels operation for operation: they agree to the last bit,
/// and this bound only absorbs what a future compiler could reorder.
const P_RELATIVE: f64 = 1e-12;

/// Intervals go through the normal quantile (statrs' here, SciPy's in the vectors).
const INTERVAL_RELATIVE: f64 = 1e-12;

fn vectors() -> Value {
    serde_json::from_str(VECTORS).expect("vectors.json parses")
}

/// A p-value of the vectors: null is NaN (a comparison without one).
fn p_value(v: &Value) -> f64 {
    if v.is_null() {
        f64::NAN
    } else {
        v.as_f64().expect("a number or null")
    }
}

fn p_values(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(p_value)
        .collect()
}

fn same(ours: f64, theirs: f64, relative: f64) -> bool {
    if ours.is_nan() || theirs.is_nan() {
        return ours.is_nan() && theirs.is_nan();
    }
    if ours == theirs {
        return true;
    }
    ((ours - theirs) / theirs).abs() <= relative
}

/// An adjusted interval of the vectors: a null bound is infinite.
fn interval(v: &Value) -> (f64, f64) {
    let bound = |i: usize, infinite: f64| v[i].as_f64().unwrap_or(infinite);
    (bound(0, f64::NEG_INFINITY), bound(1, f64::INFINITY))
}

fn same_interval(ours: (f64, f64), theirs: (f64, f64)) -> bool {
    same(ours.0, theirs.0, INTERVAL_RELATIVE) && same(ours.1, theirs.1, INTERVAL_RELATIVE)
}

#[test]
fn conformance_adjusted_p_values_agree_with_statsmodels() {
    let vectors = vectors();
    let cases = vectors["p_values"].as_array().expect("p_values");
    let (mut checked, mut failed) = (0, Vec::new());
    for case in cases {
        let p = p_values(&case["p_values"]);
        for (correction, key) in [
            (Correction::HolmBonferroni, "holm"),
            (Correction::BenjaminiHochberg, "fdr_bh"),
        ] {
            let theirs = p_values(&case[key]);
            let ours = correction.adjust(&p);
            assert_eq!(ours.len(), theirs.len(), "{}", case["name"]);
            for (i, (&o, &t)) in ours.iter().zip(&theirs).enumerate() {
                checked += 1;
                if !same(o, t, P_RELATIVE) {
                    failed.push(format!(
                        "{} {key} [{i}]: ours {o:e}, statsmodels' {t:e}",
                        case["name"]
                    ));
                }
            }
        }
    }
    println!(
        "adjusted p-values: {} of {checked} agree with statsmodels ({} families, two corrections)",
        checked - failed.len(),
        cases.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(
        cases.len() >= 140,
        "the vectors hold {} families",
        cases.len()
    );
}

#[test]
fn conformance_adjusted_intervals_follow_growthbook() {
    let vectors = vectors();
    let cases = vectors["intervals"].as_array().expect("intervals");
    let mut failed = Vec::new();
    for case in cases {
        let number = |k: &str| case[k].as_f64().expect(k);
        let ci = interval(&case["ci"]);
        let theirs = interval(&case["adjusted_ci"]);
        let ours = adjusted_interval(
            number("lift"),
            ci,
            number("adjusted_p_value"),
            number("alpha"),
        );
        if !same_interval(ours, theirs) {
            failed.push(format!(
                "{}: ours {ours:?}, expected {theirs:?}",
                case["name"]
            ));
        }
    }
    println!(
        "adjusted intervals: {} of {} agree",
        cases.len() - failed.len(),
        cases.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(
        cases.len() >= 40,
        "the vectors hold {} intervals",
        cases.len()
    );
}

/// A family of gbstats comparisons: their p-values adjusted together, then each interval.
fn check_family(family: &Value) -> Vec<String> {
    let correction: Correction =
        serde_json::from_value(family["correction"].clone()).expect("a D36 correction name");
    let alpha = family["alpha"].as_f64().expect("alpha");
    let tests = family["tests"].as_array().expect("tests");
    let raw: Vec<f64> = tests.iter().map(|t| p_value(&t["p_value"])).collect();
    let adjusted = correction.adjust(&raw);
    let mut failed = Vec::new();
    for (i, (test, &p)) in tests.iter().zip(&adjusted).enumerate() {
        let name = format!(
            "{} {} {} [{i}]",
            family["name"],
            family["test"],
            correction.as_str()
        );
        let theirs_p = p_value(&test["adjusted_p_value"]);
        if !same(p, theirs_p, P_RELATIVE) {
            failed.push(format!(
                "{name}: adjusted p-value ours {p:e}, statsmodels' {theirs_p:e}"
            ));
        }
        let lift = test["lift"].as_f64().expect("lift");
        let ours = adjusted_interval(lift, interval(&test["ci"]), p, alpha);
        let theirs = interval(&test["adjusted_ci"]);
        if !same_interval(ours, theirs) {
            failed.push(format!(
                "{name}: interval ours {ours:?}, expected {theirs:?}"
            ));
        }
    }
    failed
}

#[test]
fn conformance_families_of_gbstats_comparisons() {
    let vectors = vectors();
    let families = vectors["families"].as_array().expect("families");
    let failed: Vec<String> = families.iter().flat_map(check_family).collect();
    let tests: usize = families
        .iter()
        .map(|f| f["tests"].as_array().map_or(0, Vec::len))
        .sum();
    println!(
        "families: {} families, {tests} comparisons, {} disagreements",
        families.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(tests >= 300, "the vectors hold {tests} comparisons");
}

/// What both corrections promise whatever the family: values in `[0, 1]`, never below the raw
/// p-value, and in the raw p-values' order; Benjamini-Hochberg never above Holm.
#[test]
fn adjusted_p_values_keep_their_order_and_bounds() {
    let vectors = vectors();
    for case in vectors["p_values"].as_array().expect("p_values") {
        let p = p_values(&case["p_values"]);
        let holm = Correction::HolmBonferroni.adjust(&p);
        let bh = Correction::BenjaminiHochberg.adjust(&p);
        for i in 0..p.len() {
            if p[i].is_nan() {
                assert!(holm[i].is_nan() && bh[i].is_nan(), "{}", case["name"]);
                continue;
            }
            for adjusted in [holm[i], bh[i]] {
                assert!((p[i]..=1.0).contains(&adjusted), "{}", case["name"]);
            }
            // m / k <= m - k + 1 for every rank k; the margin is for rounding.
            assert!(bh[i] <= holm[i] * (1.0 + 1e-12), "{} [{i}]", case["name"]);
            for j in 0..p.len() {
                if p[i] < p[j] {
                    assert!(
                        holm[i] <= holm[j] && bh[i] <= bh[j],
                        "{} {i} {j}",
                        case["name"]
                    );
                }
            }
        }
    }
}
