//! GrowthBook's public SDK test vectors (D4, D5), vendored in `tests/data` with their licence.
//! One `check` helper per section; every failure names its case, and each test prints how many
//! cases it ran.

use flowgate_domain::bucketing::{
    bucket_ranges, choose_variation, equal_weights, hash, BucketRange, Namespace,
};
use flowgate_domain::conditions::{Condition, SavedGroups};
use serde_json::Value;

const CASES: &str = include_str!("../data/growthbook-cases.json");

fn section(name: &str) -> Vec<Value> {
    let all: Value = serde_json::from_str(CASES).expect("cases parse");
    all[name]
        .as_array()
        .unwrap_or_else(|| panic!("section {name} missing"))
        .clone()
}

/// Runs every case of a section through `check`, collecting failures, and reports the count.
fn run(name: &str, expected_count: usize, check: impl Fn(&Value) -> Result<(), String>) {
    let cases = section(name);
    assert_eq!(
        cases.len(),
        expected_count,
        "{name}: the vendored file changed"
    );
    let failures: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, case)| check(case).err().map(|e| format!("  #{i} {e}")))
        .collect();
    assert!(
        failures.is_empty(),
        "{name}: {} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    println!("conformance {name}: {} cases passed", cases.len());
}

const TOLERANCE: f64 = 1e-6;

#[test]
fn conformance_eval_condition() {
    run("evalCondition", 248, |case| {
        let name = case[0].as_str().unwrap_or("?");
        let condition = Condition::compile_lenient(&case[1]);
        let groups = match case.get(4).and_then(Value::as_object) {
            Some(map) => SavedGroups::new(
                map.iter()
                    .map(|(k, v)| (k.clone(), v.as_array().cloned().unwrap_or_default())),
            ),
            None => SavedGroups::empty(),
        };
        let expected = case[3].as_bool().ok_or("expected is not a bool")?;
        let got = condition.eval(&case[2], &groups);
        (got == expected)
            .then_some(())
            .ok_or_else(|| format!("{name}: expected {expected}, got {got}"))
    });
}

#[test]
fn conformance_hash() {
    run("hash", 15, |case| {
        let seed = case[0].as_str().ok_or("seed")?;
        let value = case[1].as_str().ok_or("value")?;
        let version =
            u32::try_from(case[2].as_u64().ok_or("version")?).map_err(|e| e.to_string())?;
        let got = hash(seed, value, version);
        let expected = case[3].as_f64();
        let ok = match (got, expected) {
            (None, None) => true,
            (Some(g), Some(e)) => (g - e).abs() < 1e-9,
            _ => false,
        };
        ok.then_some(()).ok_or_else(|| {
            format!("hash({seed:?}, {value:?}, {version}): expected {expected:?}, got {got:?}")
        })
    });
}

fn ranges_of(v: &Value) -> Vec<BucketRange> {
    v.as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| BucketRange {
                    start: r[0].as_f64().unwrap_or(f64::NAN),
                    end: r[1].as_f64().unwrap_or(f64::NAN),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn conformance_get_bucket_range() {
    run("getBucketRange", 13, |case| {
        let name = case[0].as_str().unwrap_or("?");
        let args = &case[1];
        let n =
            usize::try_from(args[0].as_u64().ok_or("numVariations")?).map_err(|e| e.to_string())?;
        let coverage = args[1].as_f64().ok_or("coverage")?;
        let weights: Option<Vec<f64>> = args[2]
            .as_array()
            .map(|w| w.iter().filter_map(Value::as_f64).collect());
        let got = bucket_ranges(n, coverage, weights.as_deref());
        let expected = ranges_of(&case[2]);
        let same = got.len() == expected.len()
            && got.iter().zip(&expected).all(|(g, e)| {
                (g.start - e.start).abs() < TOLERANCE && (g.end - e.end).abs() < TOLERANCE
            });
        same.then_some(())
            .ok_or_else(|| format!("{name}: expected {expected:?}, got {got:?}"))
    });
}

#[test]
fn conformance_choose_variation() {
    run("chooseVariation", 13, |case| {
        let name = case[0].as_str().unwrap_or("?");
        let n = case[1].as_f64().ok_or("n")?;
        let ranges = ranges_of(&case[2]);
        let expected = case[3].as_i64().ok_or("expected")?;
        let got = choose_variation(n, &ranges).map_or(-1, |i| i as i64);
        (got == expected)
            .then_some(())
            .ok_or_else(|| format!("{name}: expected {expected}, got {got}"))
    });
}

#[test]
fn conformance_in_namespace() {
    run("inNamespace", 16, |case| {
        let name = case[0].as_str().unwrap_or("?");
        let user = case[1].as_str().ok_or("user")?;
        let ns = &case[2];
        let namespace = Namespace {
            id: ns[0].as_str().ok_or("namespace id")?.to_owned(),
            start: ns[1].as_f64().ok_or("start")?,
            end: ns[2].as_f64().ok_or("end")?,
        };
        let expected = case[3].as_bool().ok_or("expected")?;
        let got = namespace.contains(user);
        (got == expected)
            .then_some(())
            .ok_or_else(|| format!("{name}: expected {expected}, got {got}"))
    });
}

#[test]
fn conformance_get_equal_weights() {
    run("getEqualWeights", 6, |case| {
        let n = case[0].as_i64().ok_or("n")?;
        let expected: Vec<f64> = case[1]
            .as_array()
            .ok_or("weights")?
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        let got = equal_weights(n);
        let same = got.len() == expected.len()
            && got
                .iter()
                .zip(&expected)
                .all(|(g, e)| (g - e).abs() < TOLERANCE);
        same.then_some(())
            .ok_or_else(|| format!("getEqualWeights({n}): expected {expected:?}, got {got:?}"))
    });
}
