//! What a catalog change does to running experiments (D19): shares computed from the ranges,
//! checked exactly where the arithmetic is simple and against hashed users everywhere.

use flowgate_domain::catalog::{diff_catalogs, Change, Experiment, ExperimentShift, Target};
use flowgate_domain::ids::AppId;
use flowgate_domain::{Catalog, CatalogData};
use serde_json::{json, Value};

use crate::fixtures::*;

/// The running 50/50 paywall experiment of the fixture, changed by `edit`.
fn with_experiment(edit: impl FnOnce(&mut Value)) -> Value {
    let mut doc = catalog_json();
    edit(&mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"]);
    doc
}

fn shift_of(before: &Value, after: &Value) -> ExperimentShift {
    let (a, b) = (data_from(before), data_from(after));
    let diff = diff_catalogs(&a, &b, &build(before), &build(after));
    let found: Vec<_> = diff
        .experiments
        .into_iter()
        .filter(|e| e.id.to_string() == EXP)
        .collect();
    assert_eq!(found.len(), 1, "one shift for the running experiment");
    found.into_iter().next().unwrap()
}

fn paywall_experiment(c: &Catalog) -> &Experiment {
    let app = c.app(APP1.parse::<AppId>().unwrap()).unwrap();
    match &app.placement("paywall").unwrap().rules()[1].target() {
        Target::Experiment(e) => e,
        _ => panic!("an experiment"),
    }
}

/// Hashed users (deterministic ids) through the real assignment before and after: the share of
/// each kind of move.
fn sampled(before: &Catalog, after: &Catalog) -> [f64; 4] {
    let (old, new) = (paywall_experiment(before), paywall_experiment(after));
    let n = 100_000;
    let mut counts = [0usize; 4];
    for i in 0..n {
        let user = format!("user-{i:06}-{}", i * 7919 % 1000);
        match (
            old.assign(&user).map(|v| v.id()),
            new.assign(&user).map(|v| v.id()),
        ) {
            (Some(a), Some(b)) if a != b => counts[0] += 1,
            (None, Some(_)) => counts[1] += 1,
            (Some(_), None) => counts[2] += 1,
            _ => counts[3] += 1,
        }
    }
    counts.map(|c| c as f64 / n as f64)
}

/// The computed shares agree with hashed users within five standard errors.
fn agrees(shift: &ExperimentShift, before: &Value, after: &Value) {
    let got = sampled(&build(before), &build(after));
    let expected = [
        shift.change_variant,
        shift.enter,
        shift.leave,
        shift.keep_variant + shift.outside,
    ];
    for (g, e) in got.iter().zip(expected) {
        let sigma = (e * (1.0 - e) / 100_000.0).sqrt().max(1e-4);
        assert!(
            (g - e).abs() < 5.0 * sigma,
            "sampled {got:?}, computed {expected:?}"
        );
    }
}

#[test]
fn a_reweight_from_50_50_to_70_30_moves_exactly_20_percent() {
    let before = catalog_json();
    let after = with_experiment(|e| {
        e["variants"][0]["weight"] = json!(7);
        e["variants"][1]["weight"] = json!(3);
    });
    let shift = shift_of(&before, &after);
    assert_eq!(shift.change_variant, 0.2);
    assert_eq!(shift.keep_variant, 0.8);
    assert_eq!((shift.enter, shift.leave, shift.outside), (0.0, 0.0, 0.0));
    assert_eq!(shift.variants.len(), 2);
    assert_eq!(
        (shift.variants[0].before, shift.variants[0].after),
        (0.5, 0.7)
    );
    assert_eq!(
        (shift.variants[1].before, shift.variants[1].after),
        (0.5, 0.3)
    );
    assert!(!shift.rule_changed);
    agrees(&shift, &before, &after);
}

#[test]
fn adding_a_variant_at_the_end_moves_the_users_of_the_shifted_ranges() {
    let before = catalog_json();
    let after = with_experiment(|e| {
        e["variants"].as_array_mut().unwrap().push(
            json!({"id": "60000000-0000-4000-8000-0000000000ff", "name": "third", "weight": 1, "flow_id": FLOW_US}),
        );
    });
    let shift = shift_of(&before, &after);
    // Ranges [0, 1/3), [1/3, 2/3), [2/3, 1) over hash values k / 10000: control -> new for
    // k in 3334..=4999 (1,666 values), new -> third for k in 6667..=9999 (3,333 values).
    assert_eq!(shift.change_variant, 4_999.0 / 10_000.0);
    assert_eq!(shift.keep_variant, 5_001.0 / 10_000.0);
    assert_eq!((shift.enter, shift.leave), (0.0, 0.0));
    assert_eq!(shift.variants[2].name, "third");
    assert_eq!(shift.variants[2].before, 0.0);
    agrees(&shift, &before, &after);
}

#[test]
fn raising_coverage_moves_nobody_and_adds_users() {
    let before = with_experiment(|e| e["coverage"] = json!(0.5));
    let after = catalog_json();
    let shift = shift_of(&before, &after);
    assert_eq!(shift.change_variant, 0.0, "nobody changes variant");
    assert_eq!(shift.leave, 0.0, "nobody leaves");
    assert_eq!(shift.enter, 0.5);
    assert_eq!(shift.keep_variant, 0.5);
    agrees(&shift, &before, &after);
    // And lowering it is the reverse.
    let back = shift_of(&after, &before);
    assert_eq!(
        (back.leave, back.enter, back.change_variant),
        (0.5, 0.0, 0.0)
    );
}

#[test]
fn namespaces_seeds_and_pausing_are_counted() {
    let before = catalog_json();
    // A namespace of half the users: half leave, nobody changes variant.
    let narrowed = with_experiment(|e| e["namespace"] = json!(["pricing", 0.0, 0.5]));
    let shift = shift_of(&before, &narrowed);
    assert_eq!(
        (shift.leave, shift.change_variant, shift.enter),
        (0.5, 0.0, 0.0)
    );
    agrees(&shift, &before, &narrowed);
    // Moving the namespace range: the same hash, so exactly the users of [0.3, 0.5) stay.
    let moved = with_experiment(|e| e["namespace"] = json!(["pricing", 0.3, 0.8]));
    let shift = shift_of(&narrowed, &moved);
    assert_eq!((shift.leave, shift.enter), (0.3, 0.3));
    assert_eq!(shift.keep_variant, 0.2);
    agrees(&shift, &narrowed, &moved);
    // Another seed re-buckets everyone independently: half change variant.
    let reseeded = with_experiment(|e| e["seed"] = json!("another-seed"));
    let shift = shift_of(&before, &reseeded);
    assert!((shift.change_variant - 0.5).abs() < 1e-12, "{shift:?}");
    agrees(&shift, &before, &reseeded);
    // Pausing: everyone leaves.
    let paused = with_experiment(|e| e["status"] = json!("paused"));
    let shift = shift_of(&before, &paused);
    assert_eq!((shift.leave, shift.outside), (1.0, 0.0));
    assert_eq!(shift.status_after.map(|s| s.as_str()), Some("paused"));
}

#[test]
fn unchanged_experiments_are_not_reported_and_renames_are_not_moves() {
    let before = catalog_json();
    let renamed = with_experiment(|e| {
        e["name"] = json!("renamed");
        e["variants"][1]["name"] = json!("renamed variant");
    });
    let (a, b) = (data_from(&before), data_from(&renamed));
    let diff = diff_catalogs(&a, &b, &build(&before), &build(&renamed));
    assert!(diff.experiments.is_empty(), "{:?}", diff.experiments);
    assert_eq!(diff.placements.len(), 1, "the rule's target changed");
    assert_eq!(diff.placements[0].rules[0].change, ["target"]);
    assert!(diff_catalogs(&a, &a, &build(&before), &build(&before)).is_empty());
}

#[test]
fn entity_changes_name_what_is_added_published_and_unpublished() {
    let before = catalog_json();
    let mut after = catalog_json();
    let app = &mut after["workspaces"][0]["apps"][0];
    app["flows"][0]["published_version"] = json!(1);
    app["flows"][1]["published_version"] = Value::Null;
    app["flows"].as_array_mut().unwrap().push(json!({
        "id": "30000000-0000-4000-8000-0000000000aa", "name": "Added", "published_version": null,
        "versions": [{"id": "40000000-0000-4000-8000-0000000000aa", "version": 1, "schema_version": 1, "flow_schema": {}}]
    }));
    app["placements"][0]["rules"][0]["audience"] = json!({"country": "FR"});
    app["placements"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "fresh", "default_flow_id": FLOW_NEW}));
    let (a, b): (CatalogData, CatalogData) = (data_from(&before), data_from(&after));
    let diff = diff_catalogs(&a, &b, &build(&before), &build(&after));
    let changes: Vec<(&str, &str, Change)> = diff
        .entities
        .iter()
        .map(|e| (e.entity, e.name.as_str(), e.change))
        .collect();
    assert_eq!(
        changes,
        [
            ("flow", "US onboarding", Change::Published),
            ("flow", "Default", Change::Unpublished),
            ("flow", "Added", Change::Added),
            ("version", "Added version 1", Change::Added),
            ("placement", "onboarding", Change::Changed),
            ("placement", "fresh", Change::Added),
        ]
    );
    assert_eq!(diff.entities[0].detail, "version 2 -> version 1");
    let onboarding = &diff.placements[0];
    assert_eq!(
        (onboarding.key.as_str(), onboarding.rules[0].rule),
        ("onboarding", 0)
    );
    assert_eq!(onboarding.rules[0].change, ["audience"]);
}

/// Analysis settings (D27) change how results are read, not who sees what: the dry run lists
/// the experiment with each setting's old and new value, and no placement, rule or share.
#[test]
fn analysis_changes_are_listed_as_the_experiments_not_as_moves() {
    let before = catalog_json();
    let after = with_experiment(|e| {
        e["analysis"] = json!({"primary_metric": "flow_complete", "guardrail_metrics": ["revenue"],
            "minimum_users": 500});
    });
    let diff = diff_catalogs(
        &data_from(&before),
        &data_from(&after),
        &build(&before),
        &build(&after),
    );
    assert!(diff.placements.is_empty(), "{:?}", diff.placements);
    assert!(diff.experiments.is_empty(), "{:?}", diff.experiments);
    assert_eq!(diff.entities.len(), 1, "{:?}", diff.entities);
    let change = &diff.entities[0];
    assert_eq!(
        (change.entity, change.id.as_str(), change.change),
        ("experiment", EXP, Change::Changed)
    );
    assert_eq!(
        change.detail,
        "analysis: primary_metric purchase_complete -> flow_complete; guardrail_metrics none -> \
         revenue; minimum_users 100 -> 500"
    );
    // The defaults written out are the same settings: listed, said so.
    let explicit = with_experiment(|e| e["analysis"] = json!({"sequential": true}));
    let diff = diff_catalogs(
        &data_from(&before),
        &data_from(&explicit),
        &build(&before),
        &build(&explicit),
    );
    assert_eq!(
        diff.entities[0].detail,
        "analysis written out, same settings"
    );
    // An analysis change beside a reweight: both, each in its place.
    let both = with_experiment(|e| {
        e["analysis"] = json!({"sequential": false});
        e["variants"][0]["weight"] = json!(0.7);
        e["variants"][1]["weight"] = json!(0.3);
    });
    let diff = diff_catalogs(
        &data_from(&before),
        &data_from(&both),
        &build(&before),
        &build(&both),
    );
    assert_eq!(diff.entities.len(), 2, "{:?}", diff.entities);
    assert_eq!(
        diff.entities[0].detail,
        "analysis: sequential true -> false"
    );
    assert_eq!(diff.experiments.len(), 1);
}

/// An app's App Store fields (D30) are the app's own fields: setting, changing or removing
/// them is the app changed, and nothing else.
#[test]
fn app_store_fields_are_an_app_change() {
    let before = catalog_json();
    let with = |fields: Value| {
        let mut doc = catalog_json();
        for (name, value) in fields.as_object().unwrap() {
            doc["workspaces"][0]["apps"][0][name] = value.clone();
        }
        doc
    };
    let diff_of =
        |a: &Value, b: &Value| diff_catalogs(&data_from(a), &data_from(b), &build(a), &build(b));
    let bundle = with(json!({"apple_bundle_id": "com.example.acme"}));
    let both = with(json!({"apple_bundle_id": "com.example.acme",
                           "apple_environments": ["Production", "Sandbox"]}));
    for (a, b) in [
        (&before, &bundle),
        (&bundle, &both),
        (&both, &before),
        (
            &bundle,
            &with(json!({"apple_bundle_id": "com.example.other"})),
        ),
    ] {
        let diff = diff_of(a, b);
        let changes: Vec<(&str, &str, Change)> = diff
            .entities
            .iter()
            .map(|e| (e.entity, e.id.as_str(), e.change))
            .collect();
        assert_eq!(changes, [("app", APP1, Change::Changed)], "{diff:?}");
        assert!(diff.placements.is_empty() && diff.experiments.is_empty());
    }
    assert!(diff_of(&both, &both).is_empty());
}

/// D28: turning a rule off or on is a change of its placement's rules; turning off the rule
/// of a running experiment takes its users out of it, and back in when it is on again.
#[test]
fn turning_a_rule_off_or_on_changes_its_placements_rules() {
    let before = catalog_json();
    let mut after = catalog_json();
    after["workspaces"][0]["apps"][0]["placements"][0]["rules"][1]["enabled"] = json!(false);
    let (a, b) = (data_from(&before), data_from(&after));
    let diff = diff_catalogs(&a, &b, &build(&before), &build(&after));
    assert_eq!(diff.placements.len(), 1, "{diff:?}");
    let placement = &diff.placements[0];
    assert_eq!(placement.key, "onboarding");
    assert_eq!((placement.rules_before, placement.rules_after), (2, 2));
    assert_eq!(placement.rules.len(), 1);
    assert_eq!(
        (placement.rules[0].rule, &placement.rules[0].change),
        (1, &vec!["off"])
    );
    assert!(diff.experiments.is_empty(), "no experiment in that rule");
    let back = diff_catalogs(&b, &a, &build(&after), &build(&before));
    assert_eq!(back.placements[0].rules[0].change, ["on"]);

    // The running experiment's rule.
    let mut off = catalog_json();
    off["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["enabled"] = json!(false);
    let shift = shift_of(&before, &off);
    assert_eq!(shift.rule_enabled, (true, false));
    assert_eq!(
        (shift.leave, shift.keep_variant, shift.enter),
        (1.0, 0.0, 0.0)
    );
    assert_eq!(shift.status_after, shift.status_before, "still running");
    let json = serde_json::to_value(&shift).unwrap();
    assert_eq!(json["rule_enabled"], json!([true, false]));
    let on = shift_of(&off, &before);
    assert_eq!((on.enter, on.leave), (1.0, 0.0));
    // A rule on both times is not mentioned.
    let reweighted = with_experiment(|e| e["variants"][0]["weight"] = json!(3));
    let json = serde_json::to_value(shift_of(&before, &reweighted)).unwrap();
    assert!(json.get("rule_enabled").is_none(), "{json}");
}
