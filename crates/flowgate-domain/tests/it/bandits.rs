//! Bandit weight updates (D37) against GrowthBook's own: the 40 cases of
//! `tests/data/growthbook-bandits/cases.json`, written by gbstats at GrowthBook commit
//! `8f1db445` (`generate.py` and `README.md` beside it; GrowthBook's MIT licence is
//! `tests/data/GROWTHBOOK-LICENSE.txt`).
//!
//! The README's rules, with one `check(case)`:
//! - **Deterministic fields** (the period reduction, the posteriors, the intervals, the
//!   messages and flags, the floor rule as a pure function, and the weights whenever none were
//!   computed) agree to `1e-9` relative plus `1e-12` absolute. Each layer is fed the recorded
//!   output of the one before it (the posterior from the recorded rows), and the whole update
//!   is then run again from the raw periods.
//! - **Sampled fields** (best-arm probabilities and new weights, which gbstats estimates from
//!   10,000 draws) fall within 0.015 of the range over 20 other seeds. Ours are integrated
//!   exactly, so they also agree with the generator's own integration (`reference_exact`) to
//!   1e-9 (the README offers exact methods 1e-6).
//! - GrowthBook's `seed` is not compared: it names a sample, and nothing here is drawn.
//! - The case where gbstats fails (inverse top-two with two arms) fails here too.

use flowgate_domain::results::bandit::{
    allocation, apply_floor, posterior, rank_probabilities, reduce_periods, update, update_reduced,
    ArmPosterior, BanditError, BanditSettings, BanditUpdate, PeriodReduction, UpdateStatus,
    MIN_USERS_PER_ARM, PRIOR_MEAN, PRIOR_PRECISION, PRIOR_VARIANCE,
};
use flowgate_domain::results::VariantSums;
use serde_json::Value;

const CASES: &str = include_str!("../data/growthbook-bandits/cases.json");

/// The README's deterministic tolerance.
fn exact(ours: f64, theirs: f64) -> bool {
    (ours - theirs).abs() <= 1e-9 * ours.abs().max(theirs.abs()) + 1e-12
}

/// The failures of one case, each naming the field.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn number(&mut self, what: &str, ours: f64, theirs: &Value) {
        match theirs.as_f64() {
            Some(t) if exact(ours, t) => {}
            _ => self
                .0
                .push(format!("{what}: ours {ours:e}, GrowthBook {theirs}")),
        }
    }

    fn numbers(&mut self, what: &str, ours: &[f64], theirs: &Value) {
        let theirs = theirs.as_array().map(Vec::as_slice).unwrap_or_default();
        if ours.len() != theirs.len() {
            self.0
                .push(format!("{what}: ours {ours:?}, GrowthBook {theirs:?}"));
            return;
        }
        for (i, (o, t)) in ours.iter().zip(theirs).enumerate() {
            self.number(&format!("{what}[{i}]"), *o, t);
        }
    }

    fn equal<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, ours: T, theirs: T) {
        if ours != theirs {
            self.0
                .push(format!("{what}: ours {ours:?}, GrowthBook {theirs:?}"));
        }
    }

    /// The README's sampled rule: within `[min − margin, max + margin]` of the 20 seeds.
    fn sampled(&mut self, what: &str, ours: &[f64], spread: &Value, margin: f64) {
        let (min, max) = (floats(&spread["min"]), floats(&spread["max"]));
        if ours.len() != min.len() || ours.len() != max.len() {
            self.0
                .push(format!("{what}: ours {ours:?}, spread {spread}"));
            return;
        }
        for (i, o) in ours.iter().enumerate() {
            if !(min[i] - margin <= *o && *o <= max[i] + margin) {
                self.0.push(format!(
                    "{what}[{i}]: ours {o}, outside [{} - {margin}, {} + {margin}]",
                    min[i], max[i]
                ));
            }
        }
    }

    /// `reference_exact`: the generator's own numerical integration (accurate to about
    /// 1e-10), to 1e-9; the README asks 1e-6 of an exact method, ours is closer.
    fn integrated(&mut self, what: &str, ours: &[f64], theirs: &Value) {
        let theirs = floats(theirs);
        if ours.len() != theirs.len() || ours.iter().zip(&theirs).any(|(o, t)| (o - t).abs() > 1e-9)
        {
            self.0
                .push(format!("{what}: ours {ours:?}, integrated {theirs:?}"));
        }
    }
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect())
        .unwrap_or_default()
}

fn sums(v: &Value, users: &str) -> VariantSums {
    VariantSums {
        users: v[users].as_u64().expect("users"),
        sum: v["sum"].as_f64().expect("sum"),
        sum_squares: v["sum_squares"].as_f64().expect("sum_squares"),
    }
}

fn periods(case: &Value) -> Vec<Vec<VariantSums>> {
    case["input"]["periods"]
        .as_array()
        .expect("periods")
        .iter()
        .map(|p| {
            p["arms"]
                .as_array()
                .expect("arms")
                .iter()
                .map(|c| sums(c, "users"))
                .collect()
        })
        .collect()
}

fn settings(case: &Value) -> BanditSettings {
    let s = &case["input"]["settings"];
    BanditSettings {
        min_weight: s["min_variation_weight"].as_f64().expect("min weight"),
        alpha: s["alpha"].as_f64().expect("alpha"),
        inverse: case["input"]["metric"]["inverse"]
            .as_bool()
            .expect("inverse"),
        top_two: s["top_two"].as_bool().expect("top_two"),
        reweight: s["reweight"].as_bool().expect("reweight"),
    }
}

/// The recorded rows, as GrowthBook's SQL handed them to gbstats.
fn recorded_reduction(case: &Value) -> PeriodReduction {
    let r = &case["period_reduction"];
    PeriodReduction {
        period_weights: floats(&r["period_weights"]),
        arms: r["arms"]
            .as_array()
            .expect("arms")
            .iter()
            .map(|a| sums(a, "n"))
            .collect(),
    }
}

/// Step 1: our period weighting against the generator's restatement of GrowthBook's SQL.
fn check_reduction(case: &Value, p: &mut Problems) {
    let arms = case["input"]["settings"]["current_weights"]
        .as_array()
        .expect("current weights")
        .len();
    let ours = match reduce_periods(&periods(case), arms) {
        Ok(ours) => ours,
        Err(e) => return p.0.push(format!("reduction: {e}")),
    };
    let theirs = &case["period_reduction"];
    p.numbers(
        "period_weights",
        &ours.period_weights,
        &theirs["period_weights"],
    );
    for (i, (o, t)) in ours
        .arms
        .iter()
        .zip(theirs["arms"].as_array().expect("arms"))
        .enumerate()
    {
        p.equal(
            &format!("reduction arm {i} n"),
            Some(o.users),
            t["n"].as_u64(),
        );
        p.number(&format!("reduction arm {i} sum"), o.sum, &t["sum"]);
        p.number(
            &format!("reduction arm {i} sum_squares"),
            o.sum_squares,
            &t["sum_squares"],
        );
        p.equal(
            &format!("reduction arm {i} row_present"),
            Some(o.users > 0),
            t["row_present"].as_bool(),
        );
    }
}

/// Step 2, from the recorded rows.
fn check_posteriors(case: &Value, p: &mut Problems) {
    let theirs = &case["expected"]["posterior"];
    let ours: Vec<_> = recorded_reduction(case)
        .arms
        .iter()
        .map(posterior)
        .collect();
    let field = |f: fn(&ArmPosterior) -> f64| -> Vec<f64> { ours.iter().map(f).collect() };
    p.numbers(
        "posterior users",
        &field(|a| a.users as f64),
        &theirs["users"],
    );
    p.numbers("data_mean", &field(|a| a.data_mean), &theirs["data_mean"]);
    p.numbers(
        "data_variance",
        &field(|a| a.data_variance),
        &theirs["data_variance"],
    );
    p.numbers(
        "data_precision",
        &field(|a| a.data_precision),
        &theirs["data_precision"],
    );
    p.numbers(
        "posterior_mean",
        &field(|a| a.mean),
        &theirs["posterior_mean"],
    );
    p.numbers(
        "posterior_variance",
        &field(|a| a.variance),
        &theirs["posterior_variance"],
    );
    p.number("prior_mean", PRIOR_MEAN, &theirs["prior_mean"]);
    p.number(
        "prior_precision",
        PRIOR_PRECISION,
        &theirs["prior_precision"],
    );
    // The full rank matrix against the generator's integration, as a check on the quadrature.
    let ranks: Vec<f64> = rank_probabilities(&ours).into_iter().flatten().collect();
    let reference: Vec<Value> = case["reference_exact"]["rank_probabilities_descending"]
        .as_array()
        .expect("ranks")
        .iter()
        .flat_map(|row| row.as_array().expect("rank row").clone())
        .collect();
    p.integrated("rank probabilities", &ranks, &Value::Array(reference));
}

/// Step 5 as a pure function: GrowthBook's recorded allocation through our floor.
fn check_floor(case: &Value, settings: &BanditSettings, p: &mut Problems) {
    let expected = &case["expected"];
    let recorded = floats(&expected["allocation_before_floor"]);
    let weights = &expected["compute_result"]["bandit_weights"];
    if recorded.is_empty() || weights.is_null() {
        return;
    }
    match apply_floor(&recorded, settings.min_weight) {
        Ok(ours) => {
            p.numbers("floor of GrowthBook's allocation", &ours, weights);
            if settings.reweight {
                p.numbers(
                    "floor of GrowthBook's allocation (updatedWeights)",
                    &ours,
                    &expected["bandit_result"]["updatedWeights"],
                );
            }
        }
        Err(e) => p.0.push(format!("floor: {e}")),
    }
}

/// Steps 2 to 6 as one update, against `compute_result` and `bandit_result`.
fn check_update(
    case: &Value,
    settings: &BanditSettings,
    ours: &BanditUpdate,
    what: &str,
    margin: f64,
    p: &mut Problems,
) {
    let expected = &case["expected"];
    let (direct, record) = (&expected["compute_result"], &expected["bandit_result"]);
    let spread = &case["spread_20_seeds"];
    let users: Vec<f64> = ours.arms.iter().map(|a| a.posterior.users as f64).collect();
    let data_means: Vec<f64> = ours.arms.iter().map(|a| a.posterior.data_mean).collect();
    let lows: Vec<f64> = ours.arms.iter().map(|a| a.interval.0).collect();
    let highs: Vec<f64> = ours.arms.iter().map(|a| a.interval.1).collect();
    let column = |v: &Value, i: usize| {
        Value::Array(
            v.as_array()
                .expect("ci")
                .iter()
                .map(|c| c[i].clone())
                .collect(),
        )
    };
    p.numbers(&format!("{what} users"), &users, &direct["users"]);
    p.numbers(&format!("{what} cr"), &data_means, &direct["cr"]);
    p.numbers(&format!("{what} ci low"), &lows, &column(&direct["ci"], 0));
    p.numbers(
        &format!("{what} ci high"),
        &highs,
        &column(&direct["ci"], 1),
    );
    let enough = ours.status == UpdateStatus::Updated;
    p.equal(
        &format!("{what} enough_units"),
        Some(enough),
        direct["enough_units"].as_bool(),
    );
    p.equal(
        &format!("{what} update_message"),
        Some(ours.status.message()),
        direct["update_message"].as_str(),
    );
    p.sampled(
        &format!("{what} best_arm_probabilities"),
        &ours.best_arm_probabilities,
        &spread["best_arm_probabilities"],
        margin,
    );
    let reference = &case["reference_exact"];
    p.integrated(
        &format!("{what} best_arm_probabilities"),
        &ours.best_arm_probabilities,
        &reference["best_arm_probabilities"],
    );
    p.integrated(
        &format!("{what} allocation"),
        &ours.allocation,
        &reference["allocation_before_floor"],
    );
    match &ours.new_weights {
        None => p.equal(
            &format!("{what} bandit_weights"),
            true,
            direct["bandit_weights"].is_null(),
        ),
        Some(w) => {
            p.sampled(
                &format!("{what} bandit_weights"),
                w,
                &spread["bandit_weights"],
                margin,
            );
            p.integrated(
                &format!("{what} bandit_weights"),
                w,
                &reference["bandit_weights"],
            );
        }
    }
    // The stored record (`BanditResult`).
    for (i, arm) in ours.arms.iter().enumerate() {
        let theirs = &record["singleVariationResults"][i];
        p.number(
            &format!("{what} record arm {i} users"),
            arm.posterior.users as f64,
            &theirs["users"],
        );
        p.number(
            &format!("{what} record arm {i} cr"),
            arm.posterior.mean,
            &theirs["cr"],
        );
        p.number(
            &format!("{what} record arm {i} ci low"),
            arm.interval.0,
            &theirs["ci"][0],
        );
        p.number(
            &format!("{what} record arm {i} ci high"),
            arm.interval.1,
            &theirs["ci"][1],
        );
    }
    p.numbers(
        &format!("{what} currentWeights"),
        &ours.current_weights,
        &record["currentWeights"],
    );
    p.equal(
        &format!("{what} reweight"),
        Some(ours.reweight),
        record["reweight"].as_bool(),
    );
    p.equal(
        &format!("{what} updateMessage"),
        Some(ours.status.message()),
        record["updateMessage"].as_str(),
    );
    p.equal(&format!("{what} error"), Some(""), record["error"].as_str());
    check_were_updated(ours, record, what, margin, p);
    // GrowthBook stores no probabilities when an arm has too few users.
    if enough {
        p.sampled(
            &format!("{what} bestArmProbabilities"),
            &ours.best_arm_probabilities,
            &spread["best_arm_probabilities"],
            margin,
        );
    } else {
        p.equal(
            &format!("{what} bestArmProbabilities"),
            true,
            record["bestArmProbabilities"].is_null(),
        );
    }
    // The uniform fallback (`K·f ≥ 1`) is deterministic.
    let uniform = settings.min_weight.max(0.0) * ours.arms.len() as f64 >= 1.0;
    if ours.new_weights.is_some() && ours.reweight && !uniform {
        p.sampled(
            &format!("{what} updatedWeights"),
            &ours.updated_weights,
            &spread["bandit_weights"],
            margin,
        );
    } else {
        p.numbers(
            &format!("{what} updatedWeights"),
            &ours.updated_weights,
            &record["updatedWeights"],
        );
    }
}

/// `weightsWereUpdated` is `reweight` and new weights different from the current ones,
/// compared exactly. It agrees with GrowthBook's, except where it follows from the sampled
/// weights alone: when all arms are alike, the exact weights are the current uniform ones
/// (no change), while gbstats' estimates differ from them by sampling noise (a change). That
/// divergence is accepted only when GrowthBook's new weights are within the sampled margin of
/// the current ones.
fn check_were_updated(
    ours: &BanditUpdate,
    record: &Value,
    what: &str,
    margin: f64,
    p: &mut Problems,
) {
    let theirs = record["weightsWereUpdated"].as_bool();
    if Some(ours.weights_were_updated) == theirs {
        return;
    }
    let their_weights = floats(&record["updatedWeights"]);
    let noise_only = theirs == Some(true)
        && ours.new_weights.is_some()
        && ours.updated_weights == ours.current_weights
        && their_weights.len() == ours.current_weights.len()
        && their_weights
            .iter()
            .zip(&ours.current_weights)
            .all(|(t, c)| (t - c).abs() <= margin);
    if !noise_only {
        p.equal(
            &format!("{what} weightsWereUpdated"),
            Some(ours.weights_were_updated),
            theirs,
        );
    }
}

/// The case where gbstats raised: ours fails too, with the typed error.
fn check_failure(case: &Value, settings: &BanditSettings, p: &mut Problems) {
    let current = floats(&case["input"]["settings"]["current_weights"]);
    match update_reduced(recorded_reduction(case), &current, settings) {
        Err(BanditError::InverseTopTwoNeedsThreeArms) => {}
        other => p.0.push(format!(
            "gbstats raised {}, ours {other:?}",
            case["expected"]["engine_error"]
        )),
    }
    let ranks = vec![vec![0.5, 0.5]; 2];
    p.equal(
        "allocation",
        allocation(&ranks, true, true),
        Err(BanditError::InverseTopTwoNeedsThreeArms),
    );
}

fn check(case: &Value, margin: f64) -> Result<(), String> {
    let mut p = Problems::default();
    let settings = settings(case);
    check_reduction(case, &mut p);
    check_posteriors(case, &mut p);
    check_floor(case, &settings, &mut p);
    if !case["expected"]["engine_error"].is_null() {
        check_failure(case, &settings, &mut p);
    } else {
        let current = floats(&case["input"]["settings"]["current_weights"]);
        match update_reduced(recorded_reduction(case), &current, &settings) {
            Ok(ours) => check_update(case, &settings, &ours, "layered", margin, &mut p),
            Err(e) => p.0.push(format!("layered update: {e}")),
        }
        match update(&periods(case), &current, &settings) {
            Ok(ours) => check_update(case, &settings, &ours, "end to end", margin, &mut p),
            Err(e) => p.0.push(format!("end-to-end update: {e}")),
        }
    }
    if p.0.is_empty() {
        Ok(())
    } else {
        Err(p.0.join("\n    "))
    }
}

#[test]
fn conformance_bandit_updates_agree_with_growthbook() {
    let all: Value = serde_json::from_str(CASES).expect("cases parse");
    let cases = all["cases"].as_array().expect("cases");
    let margin = all["tolerance"]["sampled"]["margin"]
        .as_f64()
        .expect("margin");
    let constants = &all["constants"];
    assert_eq!(
        constants["min_users_per_arm"].as_u64(),
        Some(MIN_USERS_PER_ARM)
    );
    assert_eq!(constants["prior"]["mean"].as_f64(), Some(PRIOR_MEAN));
    assert_eq!(
        constants["prior"]["variance"].as_f64(),
        Some(PRIOR_VARIANCE)
    );
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            check(case, margin)
                .err()
                .map(|e| format!("  {}:\n    {e}", case["id"]))
        })
        .collect();
    println!(
        "bandit updates: {} of {} GrowthBook cases agree",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(cases.len(), 40, "the vendored file changed");
}
