//! Experiment statistics against GrowthBook's stats engine (D22): the golden vectors of
//! `tests/data/gbstats/vectors.json`, written by gbstats 0.8.0 itself (`generate.sh` beside
//! them). One `check(case)`; every failure names its case. The sequential test's vectors
//! (`sequential.json`, D27) have their own `check_sequential(case)`. Then the report's assembly.

use std::collections::BTreeMap;

use flowgate_domain::catalog::ExperimentStatus;
use flowgate_domain::events::EventType;
use flowgate_domain::ids::{AppId, ExperimentId, VariantId};
use flowgate_domain::results::{
    compare, compare_sequential, fisher_exact, report, srm_p_value, DailyCounts, Exposure, Folder,
    Method, MetricKind, NoEstimate, Outcome, ResultsData, ResultsQuery, SequentialConfig,
    VariantCounts, VariantSums, Verdict, REVENUE_METRIC,
};
use serde_json::Value;
use time::macros::{date, datetime};

const VECTORS: &str = include_str!("../data/gbstats/vectors.json");
const SEQUENTIAL_VECTORS: &str = include_str!("../data/gbstats/sequential.json");
const FISHER_VECTORS: &str = include_str!("../data/fisher/fisher.json");

/// Relative agreement asked of every figure gbstats returns (D22).
const RELATIVE: f64 = 1e-6;

fn close(ours: f64, theirs: f64) -> bool {
    if theirs == 0.0 {
        ours.abs() <= 1e-12
    } else {
        ((ours - theirs) / theirs).abs() <= RELATIVE
    }
}

fn sums(v: &Value) -> VariantSums {
    VariantSums {
        users: v["n"].as_u64().expect("n"),
        sum: v["sum"].as_f64().expect("sum"),
        sum_squares: v["sum_squares"].as_f64().expect("sum_squares"),
    }
}

fn reason(gbstats: &str) -> NoEstimate {
    match gbstats {
        "ZERO_NEGATIVE_BASELINE_VARIATION" => NoEstimate::ControlMeanZero,
        "NO_UNITS_IN_VARIATION" => NoEstimate::NoUsers,
        "ZERO_NEGATIVE_VARIANCE" => NoEstimate::ZeroVariance,
        other => panic!("a gbstats message the vectors were not expected to hold: {other}"),
    }
}

/// One case: every variant against the control, and the sample ratio check.
fn check(case: &Value) -> Result<(), String> {
    let kind = kind_of(case)?;
    let variants: Vec<VariantSums> = case["variants"]
        .as_array()
        .ok_or("variants")?
        .iter()
        .map(sums)
        .collect();
    let mut problems = Vec::new();
    let figure = |what: &str, ours: f64, theirs: &Value| {
        let theirs = theirs.as_f64().unwrap_or(f64::NAN);
        (!close(ours, theirs)).then(|| format!("{what}: ours {ours:e}, gbstats {theirs:e}"))
    };
    for (i, expected) in case["comparisons"]
        .as_array()
        .ok_or("comparisons")?
        .iter()
        .enumerate()
    {
        let (f, b) = (&expected["frequentist"], &expected["bayesian"]);
        let ours = compare(kind, &variants[0], &variants[i + 1]);
        match (b["error"].as_str(), ours) {
            (Some(error), Err(no)) => {
                if f["error"].is_null() {
                    problems.push(format!(
                        "variant {}: gbstats' t-test has an estimate",
                        i + 1
                    ));
                }
                if no != reason(error) {
                    problems.push(format!("variant {}: ours {no:?}, gbstats {error}", i + 1));
                }
            }
            (Some(error), Ok(e)) => {
                problems.push(format!("variant {}: ours {e:?}, gbstats {error}", i + 1));
            }
            (None, Err(no)) => problems.push(format!(
                "variant {}: ours {no:?}, gbstats an estimate",
                i + 1
            )),
            (None, Ok(e)) => {
                let v = i + 1;
                problems.extend(
                    [
                        figure(&format!("variant {v} lift"), e.lift, &f["expected"]),
                        figure(
                            &format!("variant {v} lift (bayesian)"),
                            e.lift,
                            &b["expected"],
                        ),
                        figure(&format!("variant {v} ci_low"), e.ci_low, &f["ci"][0]),
                        figure(&format!("variant {v} ci_high"), e.ci_high, &f["ci"][1]),
                        figure(&format!("variant {v} p_value"), e.p_value, &f["p_value"]),
                        figure(
                            &format!("variant {v} chance_to_win"),
                            e.chance_to_win,
                            &b["chance_to_win"],
                        ),
                        figure(
                            &format!("variant {v} credible_low"),
                            e.credible_low,
                            &b["ci"][0],
                        ),
                        figure(
                            &format!("variant {v} credible_high"),
                            e.credible_high,
                            &b["ci"][1],
                        ),
                    ]
                    .into_iter()
                    .flatten(),
                );
            }
        }
    }
    let users: Vec<u64> = variants.iter().map(|v| v.users).collect();
    let weights: Vec<f64> = case["weights"]
        .as_array()
        .ok_or("weights")?
        .iter()
        .map(|w| w.as_f64().unwrap_or(f64::NAN))
        .collect();
    problems.extend(figure(
        "srm_p_value",
        srm_p_value(&users, &weights),
        &case["srm_p_value"],
    ));
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[test]
fn statistics_agree_with_gbstats() {
    let vectors: Value = serde_json::from_str(VECTORS).expect("vectors parse");
    let cases = vectors["cases"].as_array().expect("cases");
    assert!(
        cases.len() >= 30,
        "the vectors file lost cases: {}",
        cases.len()
    );
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            check(case)
                .err()
                .map(|e| format!("  {}: {e}", case["name"].as_str().unwrap_or("?")))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} gbstats cases disagree:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    let comparisons: usize = cases
        .iter()
        .map(|c| c["comparisons"].as_array().map_or(0, Vec::len))
        .sum();
    println!(
        "gbstats: {} cases, {comparisons} comparisons agree",
        cases.len()
    );
}

/// The relative difference of `ours` from `theirs` (absolute when `theirs` is 0).
fn relative_difference(ours: f64, theirs: f64) -> f64 {
    if theirs == 0.0 {
        ours.abs()
    } else {
        ((ours - theirs) / theirs).abs()
    }
}

fn kind_of(case: &Value) -> Result<MetricKind, String> {
    match case["kind"].as_str() {
        Some("conversion") => Ok(MetricKind::Conversion),
        Some("mean") => Ok(MetricKind::Mean),
        other => Err(format!("kind {other:?}")),
    }
}

/// One sequential case: every variant against the control with the case's tuning parameter
/// and alpha. Returns the largest relative difference, or what disagrees.
fn check_sequential(case: &Value) -> Result<f64, String> {
    let kind = kind_of(case)?;
    let config = SequentialConfig::new(
        case["tuning"].as_f64().ok_or("tuning")?,
        case["alpha"].as_f64().ok_or("alpha")?,
    )
    .ok_or("tuning or alpha out of range")?;
    let variants: Vec<VariantSums> = case["variants"]
        .as_array()
        .ok_or("variants")?
        .iter()
        .map(sums)
        .collect();
    let mut problems = Vec::new();
    let mut largest: f64 = 0.0;
    for (i, expected) in case["comparisons"]
        .as_array()
        .ok_or("comparisons")?
        .iter()
        .enumerate()
    {
        let v = i + 1;
        let treatment = &variants[v];
        match (
            expected["error"].as_str(),
            compare_sequential(kind, &variants[0], treatment, &config),
        ) {
            (Some(error), Err(no)) => {
                // gbstats' t-tests see a variant without users as one of variance 0; flowgate
                // names it, as its fixed-horizon test does (gbstats' Bayesian order, D22).
                let theirs = if error == "ZERO_NEGATIVE_VARIANCE" && treatment.users == 0 {
                    NoEstimate::NoUsers
                } else {
                    reason(error)
                };
                if no != theirs {
                    problems.push(format!("variant {v}: ours {no:?}, gbstats {error}"));
                }
            }
            (Some(error), Ok(e)) => {
                problems.push(format!("variant {v}: ours {e:?}, gbstats {error}"));
            }
            (None, Err(no)) => {
                problems.push(format!("variant {v}: ours {no:?}, gbstats an estimate"));
            }
            (None, Ok(e)) => {
                for (what, ours, theirs) in [
                    ("lift", e.lift, &expected["expected"]),
                    ("ci_low", e.ci_low, &expected["ci"][0]),
                    ("ci_high", e.ci_high, &expected["ci"][1]),
                    ("p_value", e.p_value, &expected["p_value"]),
                ] {
                    let theirs = theirs.as_f64().unwrap_or(f64::NAN);
                    let difference = relative_difference(ours, theirs);
                    largest = largest.max(difference);
                    if !close(ours, theirs) {
                        problems.push(format!(
                            "variant {v} {what}: ours {ours:e}, gbstats {theirs:e}"
                        ));
                    }
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(largest)
    } else {
        Err(problems.join("; "))
    }
}

#[test]
fn the_sequential_test_agrees_with_gbstats() {
    let vectors: Value = serde_json::from_str(SEQUENTIAL_VECTORS).expect("vectors parse");
    let cases = vectors["cases"].as_array().expect("cases");
    assert!(
        cases.len() >= 40,
        "the sequential vectors file lost cases: {}",
        cases.len()
    );
    let mut largest: f64 = 0.0;
    let mut failures = Vec::new();
    for case in cases {
        match check_sequential(case) {
            Ok(difference) => largest = largest.max(difference),
            Err(e) => failures.push(format!("  {}: {e}", case["name"].as_str().unwrap_or("?"))),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} sequential gbstats cases disagree:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    // The vectors hold every kind of outcome: estimates and each reason for none.
    let errors: Vec<&str> = cases
        .iter()
        .flat_map(|c| c["comparisons"].as_array().into_iter().flatten())
        .filter_map(|c| c["error"].as_str())
        .collect();
    for error in ["ZERO_NEGATIVE_BASELINE_VARIATION", "ZERO_NEGATIVE_VARIANCE"] {
        assert!(errors.contains(&error), "no case of {error}");
    }
    println!(
        "gbstats sequential: {} cases agree, largest relative difference {largest:e}",
        cases.len()
    );
}

fn id(text: &str) -> uuid::Uuid {
    text.parse().unwrap()
}

/// The fixture's running experiment `paywall-test` (control: a holdout; `new`), 50/50.
fn with_experiment<T>(f: impl FnOnce(AppId, &flowgate_domain::catalog::Experiment) -> T) -> T {
    let catalog = crate::fixtures::build(&crate::fixtures::catalog_json());
    let (app, experiment) = catalog
        .experiment(ExperimentId::from_uuid(id(crate::fixtures::EXP)))
        .expect("the fixture's experiment");
    assert_eq!(experiment.status(), ExperimentStatus::Running);
    f(app.id(), experiment)
}

fn variant(text: &str) -> VariantId {
    VariantId::from_uuid(id(text))
}

fn conv(users: u64, converted: u64) -> VariantSums {
    VariantSums {
        users,
        sum: converted as f64,
        sum_squares: converted as f64,
    }
}

#[test]
fn the_report_orders_variants_compares_each_metric_and_accumulates_days() {
    with_experiment(|app, experiment| {
        let query = ResultsQuery::new(
            app,
            experiment,
            None,
            datetime!(2026-11-20 23:59:59 UTC),
            &[EventType::ScreenView, EventType::FlowComplete],
            "USD",
            BTreeMap::new(),
        );
        assert_eq!(
            query.conversions,
            [
                EventType::FlowComplete,
                EventType::PurchaseComplete,
                EventType::ScreenView
            ],
            "the defaults first, a metric asked twice once"
        );
        let (control, new) = (
            variant(crate::fixtures::VAR_CONTROL),
            variant(crate::fixtures::VAR_NEW),
        );
        let revenue = VariantSums {
            users: 1_000,
            sum: 499.0,
            sum_squares: 2_495.0,
        };
        let data = ResultsData {
            // The store's order is not the catalog's.
            variants: vec![
                VariantCounts::new(new, 1_000, vec![130, 60, 900], revenue),
                VariantCounts::new(
                    control,
                    1_000,
                    vec![100, 50, 880],
                    VariantSums {
                        users: 1_000,
                        ..revenue
                    },
                ),
            ],
            multiple_exposures: 3,
            unconverted_purchases: 0,
            first_exposure: Some(datetime!(2026-11-18 08:00 UTC)),
            daily: vec![
                DailyCounts::new(date!(2026 - 11 - 18), control, 400, vec![10, 5, 300]),
                DailyCounts::new(date!(2026 - 11 - 18), new, 420, vec![12, 6, 330]),
                DailyCounts::new(date!(2026 - 11 - 20), control, 600, vec![90, 45, 580]),
                DailyCounts::new(date!(2026 - 11 - 20), new, 580, vec![118, 54, 570]),
            ],
        };
        assert_eq!(
            query.method,
            Method::Sequential(SequentialConfig::default()),
            "no analysis: sequential (D27)"
        );
        let sequential = report(app, experiment, &query, &data);
        let r = report(
            app,
            experiment,
            &query.clone().with_method(Method::FixedHorizon),
            &data,
        );
        assert_eq!(r.method, Method::FixedHorizon);
        assert_eq!(sequential.method.as_str(), "sequential");
        // Sequential: gbstats' sequential interval and p-value, the Bayesian figures unchanged.
        let (a, b) = (conv(1_000, 100), conv(1_000, 130));
        let fixed = compare(MetricKind::Conversion, &a, &b).expect("an estimate");
        let seq = compare_sequential(MetricKind::Conversion, &a, &b, &SequentialConfig::default())
            .expect("an estimate");
        assert_eq!(
            sequential.metrics[0].variants[1].comparison,
            Some(Ok(flowgate_domain::results::Estimate {
                ci_low: seq.ci_low,
                ci_high: seq.ci_high,
                p_value: seq.p_value,
                ..fixed
            }))
        );
        assert!(seq.ci_low < fixed.ci_low, "sequential intervals are wider");
        assert_eq!(r.name, "paywall-test");
        assert_eq!(
            r.from,
            datetime!(2026-11-18 08:00 UTC),
            "no --from: the first exposure"
        );
        assert_eq!(r.exposed_users, 2_000);
        assert_eq!(
            r.variants
                .iter()
                .map(|v| (v.variant_id, v.users, v.weight))
                .collect::<Vec<_>>(),
            [(control, 1_000, 0.5), (new, 1_000, 0.5)]
        );
        assert!(r.srm_p_value > 0.99);
        assert!(
            r.warnings.is_empty(),
            "3 of 2,003 is under 1%: {:?}",
            r.warnings
        );
        let names: Vec<&str> = r.metrics.iter().map(|m| m.metric.as_str()).collect();
        assert_eq!(
            names,
            [
                "flow_complete",
                "purchase_complete",
                "screen_view",
                "revenue"
            ]
        );
        let flow_complete = &r.metrics[0];
        assert_eq!(flow_complete.kind, MetricKind::Conversion);
        assert_eq!(flow_complete.variants[0].comparison, None, "the control");
        assert_eq!(
            flow_complete.variants[1].comparison,
            Some(compare(
                MetricKind::Conversion,
                &conv(1_000, 100),
                &conv(1_000, 130)
            ))
        );
        assert_eq!(flow_complete.variants[1].mean, 0.13);
        let revenue_metric = &r.metrics[3];
        assert_eq!(revenue_metric.kind, MetricKind::Mean);
        assert_eq!(revenue_metric.variants[1].sums, revenue);
        // Three days, the middle one without news: cumulative, every variant every day.
        let days: Vec<(time::Date, VariantId, u64, u64)> = r
            .daily
            .iter()
            .map(|d| (d.date, d.variant_id, d.users, d.conversions[0].1))
            .collect();
        assert_eq!(
            days,
            [
                (date!(2026 - 11 - 18), control, 400, 10),
                (date!(2026 - 11 - 18), new, 420, 12),
                (date!(2026 - 11 - 19), control, 400, 10),
                (date!(2026 - 11 - 19), new, 420, 12),
                (date!(2026 - 11 - 20), control, 1_000, 100),
                (date!(2026 - 11 - 20), new, 1_000, 130),
            ]
        );
    });
}

/// An experiment's analysis settings (D27) choose the report's method, add its metrics to the
/// query and decide the verdict the report carries.
#[test]
fn the_analysis_settings_choose_the_method_metrics_and_decision() {
    let mut json = crate::fixtures::catalog_json();
    let experiment = json
        .pointer_mut("/workspaces/0/apps/0/placements/1/rules/1/experiment")
        .expect("the fixture's running experiment");
    assert_eq!(experiment["id"], crate::fixtures::EXP);
    experiment["analysis"] = serde_json::json!({
        "primary_metric": "screen_view",
        "guardrail_metrics": ["revenue", "purchase_fail"],
        "sequential": false,
        "minimum_users": 500,
    });
    let catalog = crate::fixtures::build(&json);
    let (app, experiment) = catalog
        .experiment(ExperimentId::from_uuid(id(crate::fixtures::EXP)))
        .expect("the fixture's experiment");
    let query = ResultsQuery::new(
        app.id(),
        experiment,
        None,
        datetime!(2026-11-20 23:59:59 UTC),
        &[EventType::ScreenView, EventType::LinkOpen],
        "USD",
        BTreeMap::new(),
    );
    assert_eq!(query.method, Method::FixedHorizon);
    assert_eq!(
        query.conversions,
        [
            EventType::FlowComplete,
            EventType::PurchaseComplete,
            EventType::ScreenView,
            EventType::PurchaseFail,
            EventType::LinkOpen,
        ],
        "the defaults, the analysis' event types, then the ones asked for, each once"
    );
    let (control, new) = (
        variant(crate::fixtures::VAR_CONTROL),
        variant(crate::fixtures::VAR_NEW),
    );
    let counts = |v, users, screen_views| {
        VariantCounts::new(
            v,
            users,
            vec![0, 0, screen_views, 0, 0],
            VariantSums {
                users,
                ..VariantSums::default()
            },
        )
    };
    // 400 users each: under the experiment's minimum of 500, whatever the figures.
    let data = ResultsData {
        variants: vec![counts(control, 400, 100), counts(new, 400, 200)],
        ..ResultsData::default()
    };
    let r = report(app.id(), experiment, &query, &data);
    assert_eq!(r.decision.verdict, Verdict::KeepRunning);
    assert_eq!(r.decision.reasons[0].code, "minimum_users");
    assert!(
        r.decision.reasons[0].message.contains("fewer than the 500"),
        "{:?}",
        r.decision.reasons
    );
    // 5,000 each, screen views 25% against 30%: the primary metric ships `new`.
    let data = ResultsData {
        variants: vec![counts(control, 5_000, 1_250), counts(new, 5_000, 1_500)],
        ..ResultsData::default()
    };
    let r = report(app.id(), experiment, &query, &data);
    assert_eq!(r.decision.verdict, Verdict::Ship, "{:?}", r.decision);
    assert_eq!(r.decision.variant_id, Some(new));
    assert_eq!(r.decision.reasons[0].metric.as_deref(), Some("screen_view"));
}

#[test]
fn the_report_warns_of_srm_multiple_exposures_and_unconverted_purchases_in_words() {
    with_experiment(|app, experiment| {
        let query = ResultsQuery::new(
            app,
            experiment,
            Some(datetime!(2026-11-01 00:00 UTC)),
            datetime!(2026-11-30 00:00 UTC),
            &[],
            "EUR",
            BTreeMap::new(),
        );
        let (control, new) = (
            variant(crate::fixtures::VAR_CONTROL),
            variant(crate::fixtures::VAR_NEW),
        );
        let data = ResultsData {
            variants: vec![
                VariantCounts::new(control, 6_000, vec![0, 0], VariantSums::default()),
                VariantCounts::new(new, 4_000, vec![0, 0], VariantSums::default()),
            ],
            multiple_exposures: 200,
            unconverted_purchases: 7,
            ..ResultsData::default()
        };
        let r = report(app, experiment, &query, &data);
        assert_eq!(r.from, datetime!(2026-11-01 00:00 UTC));
        let codes: Vec<&str> = r.warnings.iter().map(|w| w.code).collect();
        assert_eq!(
            codes,
            ["srm", "multiple_exposures", "unconverted_purchases"]
        );
        assert!(r.srm_p_value < 1e-10);
        assert!(
            r.warnings[0].message.contains("6000 / 4000"),
            "{}",
            r.warnings[0].message
        );
        assert!(
            r.warnings[1].message.contains("200 of 10200"),
            "{}",
            r.warnings[1].message
        );
        assert!(
            r.warnings[2].message.contains("7 purchases") && r.warnings[2].message.contains("EUR")
        );
        // No exposures at all: nothing to compare, the reason named.
        let r = report(app, experiment, &query, &ResultsData::default());
        assert_eq!(r.exposed_users, 0);
        assert_eq!(r.srm_p_value, 1.0);
        assert_eq!(
            r.metrics[0].variants[1].comparison,
            Some(Err(NoEstimate::ControlMeanZero))
        );
        assert!(r.daily.is_empty());
    });
}

/// Issue 49: purchases stored before revenue was bounded (or written by another path) can hold
/// amounts near `f64::MAX`. Folded as the stores fold them, their sums leave the float range:
/// every figure that cannot be computed says `overflow`, the control's included, and the report
/// warns; no comparison passes it off as `zero_variance`, and nothing is `inf` or NaN.
#[test]
fn revenue_sums_that_overflow_are_reported_as_overflow_not_zero_variance() {
    with_experiment(|app, experiment| {
        let query = ResultsQuery::new(
            app,
            experiment,
            None,
            datetime!(2026-11-20 23:59:59 UTC),
            &[],
            "USD",
            BTreeMap::new(),
        );
        let at = datetime!(2026-11-18 08:00 UTC);
        let purchase = |amount: f64| Outcome {
            at,
            event_type: EventType::PurchaseComplete,
            revenue: Some((amount, "USD".to_owned())),
        };
        let fold = |control: &[f64], new: &[f64]| {
            let mut folder = Folder::new(&query);
            for (variant, amounts) in [(0, control), (1, new)] {
                for &amount in amounts {
                    folder.user(&[Exposure { at, variant }], &[purchase(amount)]);
                }
                // Users who bought nothing, so a sane variant's values vary.
                for _ in 0..10 {
                    folder.user(&[Exposure { at, variant }], &[]);
                }
            }
            report(app, experiment, &query, &folder.finish())
        };
        let revenue_of = |r: &flowgate_domain::results::ExperimentReport| {
            r.metrics
                .iter()
                .find(|m| m.metric == REVENUE_METRIC)
                .expect("revenue")
                .clone()
        };

        // The control holds one purchase of f64::MAX (its sum of squares overflows); the
        // other holds ordinary purchases. Today's code said `zero_variance` for `new`.
        let r = fold(&[1.797_693_134_862_315_7e308, 9.99], &[4.99, 9.99, 19.99]);
        let revenue = revenue_of(&r);
        let (control, new) = (&revenue.variants[0], &revenue.variants[1]);
        assert_eq!(control.comparison, None, "the control");
        assert_eq!(control.reason(MetricKind::Mean), Some(NoEstimate::Overflow));
        assert_eq!(new.comparison, Some(Err(NoEstimate::Overflow)));
        assert_eq!(new.reason(MetricKind::Mean), Some(NoEstimate::Overflow));
        assert_eq!(NoEstimate::Overflow.code(), "overflow");
        assert!(
            new.sums.computable(MetricKind::Mean).is_ok(),
            "new's own figures"
        );
        assert!(control.sums.mean_interval(MetricKind::Mean).is_none());
        let overflow: Vec<&str> = r
            .warnings
            .iter()
            .filter(|w| w.code == "overflow")
            .map(|w| w.message.as_str())
            .collect();
        assert_eq!(overflow.len(), 1, "{:?}", r.warnings);
        assert!(
            overflow[0].starts_with("revenue: the figures of control cannot be computed"),
            "{}",
            overflow[0]
        );
        // The conversions are untouched.
        for m in r.metrics.iter().filter(|m| m.metric != REVENUE_METRIC) {
            assert!(m
                .variants
                .iter()
                .all(|v| v.reason(m.kind) != Some(NoEstimate::Overflow)));
        }

        // -1e308 and two purchases of 1e308 in the treatment: a sum of squares, a sum and a
        // mean beyond the range; the control is fine and has no reason of its own.
        let r = fold(&[4.99, 9.99, 19.99], &[-1e308, 1e308, 1e308, 1e308]);
        let revenue = revenue_of(&r);
        let (control, new) = (&revenue.variants[0], &revenue.variants[1]);
        assert_eq!(control.reason(MetricKind::Mean), None);
        assert_eq!(new.comparison, Some(Err(NoEstimate::Overflow)));
        assert!(!new.sums.sum_squares.is_finite());
        assert!(r
            .warnings
            .iter()
            .any(|w| w.code == "overflow" && w.message.contains("of new cannot")));

        // Large but representable revenue still compares: no false alarm.
        let r = fold(&[1e6, 2e6, 5e5], &[1e6, 3e6, 1e5]);
        let revenue = revenue_of(&r);
        assert!(matches!(revenue.variants[1].comparison, Some(Ok(_))));
        assert!(r.warnings.iter().all(|w| w.code != "overflow"));
    });
}

/// Sums straight from a store (not folded here) that no float can carry: never a wrong reason
/// and never a non-finite estimate, whatever the order of gbstats' checks would say.
#[test]
fn a_comparison_with_sums_beyond_the_float_range_is_overflow() {
    let fine = VariantSums {
        users: 100,
        sum: 499.0,
        sum_squares: 2_495.0,
    };
    let broken = [
        VariantSums {
            users: 100,
            sum: f64::MAX,
            sum_squares: f64::INFINITY,
        },
        VariantSums {
            users: 100,
            sum: f64::INFINITY,
            sum_squares: f64::INFINITY,
        },
        VariantSums {
            users: 100,
            sum: f64::NAN,
            sum_squares: 1.0,
        },
        VariantSums {
            users: 100,
            sum: -1e308,
            sum_squares: f64::INFINITY,
        },
    ];
    for b in broken {
        assert_eq!(
            compare(MetricKind::Mean, &b, &fine),
            Err(NoEstimate::Overflow),
            "control {b:?}"
        );
        assert_eq!(
            compare(MetricKind::Mean, &fine, &b),
            Err(NoEstimate::Overflow),
            "treatment {b:?}"
        );
    }
    // Finite sums, mean and variance (values 1e100 and 2e100) whose lift variance overflows:
    // the control's mean to the fourth power is beyond the range, and the lift's variance
    // came out 0, which today's code called `zero_variance`.
    let huge = VariantSums {
        users: 2,
        sum: 3e100,
        sum_squares: 5e200,
    };
    assert!(huge.computable(MetricKind::Mean).is_ok());
    assert_eq!(
        compare(MetricKind::Mean, &huge, &fine),
        Err(NoEstimate::Overflow)
    );
}

/// Why D27 tests sequentially: read after each of ten days, experiments without any true
/// effect (both variants convert at 10%) are declared significant at some look far more often
/// with the fixed-horizon test than its 5% promises, and no more than 5% of the time with the
/// sequential test. 400 simulated experiments of 10 looks, 300 more users per variant each day,
/// from a fixed seed.
#[test]
fn ten_looks_at_null_experiments_find_false_winners_only_without_sequential_testing() {
    let mut state: u64 = 0x5eed_d027;
    let mut uniform = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as f64 / 2f64.powi(64)
    };
    let (experiments, looks, daily) = (400, 10, 300);
    let config = SequentialConfig::default();
    let (mut fixed_false, mut sequential_false) = (0, 0);
    for _ in 0..experiments {
        let (mut a, mut b) = (conv(0, 0), conv(0, 0));
        let (mut fixed_found, mut sequential_found) = (false, false);
        for _ in 0..looks {
            for sums in [&mut a, &mut b] {
                let converted = (0..daily).filter(|_| uniform() < 0.1).count() as f64;
                *sums = conv(sums.users + daily, sums.sum as u64 + converted as u64);
            }
            let significant = |low: f64, high: f64| low > 0.0 || high < 0.0;
            if let Ok(e) = compare(MetricKind::Conversion, &a, &b) {
                fixed_found |= significant(e.ci_low, e.ci_high);
            }
            if let Ok(e) = compare_sequential(MetricKind::Conversion, &a, &b, &config) {
                sequential_found |= significant(e.ci_low, e.ci_high);
            }
        }
        fixed_false += u32::from(fixed_found);
        sequential_false += u32::from(sequential_found);
    }
    let rate = |n: u32| f64::from(n) / f64::from(experiments);
    eprintln!(
        "false winners in {experiments} null experiments read {looks} times: fixed horizon \
         {fixed_false}, sequential {sequential_false}"
    );
    assert!(
        rate(sequential_false) <= 0.05,
        "sequential: {sequential_false} of {experiments} null experiments declared significant"
    );
    assert!(
        rate(fixed_false) > 0.10 && fixed_false >= 3 * sequential_false.max(1),
        "fixed horizon: {fixed_false}, sequential: {sequential_false} of {experiments}"
    );
}

/// Fisher's exact test (D35) against SciPy's `fisher_exact` (`tests/data/fisher/`, written by
/// SciPy itself): every case's two-sided p-value to 1e-6 relative, or 1e-300 absolute where
/// SciPy's is below what a relative figure means.
#[test]
fn conformance_fisher_exact_agrees_with_scipy() {
    let vectors: Value = serde_json::from_str(FISHER_VECTORS).expect("fisher.json parses");
    let cases = vectors["cases"].as_array().expect("cases");
    let mut failed = Vec::new();
    for case in cases {
        let n = |k: &str| case[k].as_u64().expect(k);
        let theirs = case["p_value"].as_f64().expect("p_value");
        let ours = fisher_exact(n("a"), n("n_a"), n("b"), n("n_b"));
        let agrees = if theirs < 1e-290 {
            ours < 1e-290
        } else {
            ((ours - theirs) / theirs).abs() <= RELATIVE
        };
        if !agrees {
            failed.push(format!("{case}: ours {ours:e}, SciPy's {theirs:e}"));
        }
    }
    println!(
        "Fisher's exact test: {} of {} cases agree with SciPy",
        cases.len() - failed.len(),
        cases.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(cases.len() >= 70, "the vectors hold {} cases", cases.len());
}
