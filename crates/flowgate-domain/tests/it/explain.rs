//! Explain (D18): the trace names each rule's audience outcome (the failing clause and what it
//! saw), each experiment's bucketing, and the reason.

use flowgate_domain::bucketing::{bucket_ranges, choose_variation, hash_v2};
use flowgate_domain::explain::{Reason, Skipped, Step};
use flowgate_domain::ids::AppId;
use flowgate_domain::{Catalog, Platform, ResolveMode, ResolveRequest};
use serde_json::{json, Map, Value};

use crate::fixtures::*;

fn attrs(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn rules(trace: &[Step]) -> Vec<&flowgate_domain::explain::RuleStep> {
    trace
        .iter()
        .filter_map(|s| match s {
            Step::Rule(r) => Some(r),
            _ => None,
        })
        .collect()
}

fn explain_json(catalog: &Catalog, key: &str, user: &str, a: Value) -> (Reason, Value) {
    let app = catalog.app(APP1.parse::<AppId>().unwrap()).unwrap();
    let a = attrs(a);
    let request = ResolveRequest::new(user, "s1", Platform::Ios, &a);
    let e = app.explain(key, &request);
    let resolved = app.resolve(key, &request, ResolveMode::Normal);
    assert_eq!(
        e.resolution.version().map(|v| v.id()),
        resolved.version().map(|v| v.id())
    );
    (e.reason, serde_json::to_value(&e.trace).unwrap())
}

#[test]
fn a_failing_audience_names_its_clause_and_the_value_seen() {
    let catalog = build(&catalog_json());
    let (reason, trace) = explain_json(&catalog, "onboarding", "u1", json!({"country": "DE"}));
    assert_eq!(reason, Reason::Default);
    assert_eq!(
        trace,
        json!([
            {"rule": 0, "audience": {"matched": false, "clause_index": 0,
              "clause": {"country": {"$in": ["US", "CA"]}}, "seen": {"country": "DE"}},
             "decided": false},
            {"rule": 1, "audience": {"matched": false, "clause_index": 0,
              "clause": {"user_id": {"$inGroup": "beta"}}, "seen": {"user_id": "u1"}},
             "decided": false},
            {"default": {"flow_id": FLOW_DEFAULT, "flow_version_id": V_DEFAULT_1}}
        ])
    );
}

#[test]
fn a_matching_rule_decides_with_reason_rule() {
    let catalog = build(&catalog_json());
    let (reason, trace) = explain_json(&catalog, "onboarding", "u1", json!({"country": "CA"}));
    assert_eq!(reason, Reason::Rule);
    assert_eq!(
        trace,
        json!([{"rule": 0, "audience": {"matched": true},
                "flow": {"flow_id": FLOW_US, "flow_version_id": V_US_2}, "decided": true}])
    );
}

/// The value seen is the identity field, not an attribute of the same name (D3.6), and a
/// missing attribute reads as null.
#[test]
fn the_value_seen_follows_identity_precedence() {
    let catalog = build(&catalog_json());
    let (_, trace) = explain_json(
        &catalog,
        "onboarding",
        "u-real",
        json!({"user_id": "u-beta-1"}),
    );
    assert_eq!(trace[0]["audience"]["seen"], json!({"country": null}));
    assert_eq!(trace[1]["audience"]["seen"], json!({"user_id": "u-real"}));
}

/// D4: a dotted key is read literally first, then as a nested path; the trace shows what was
/// found either way. A logical clause reports every attribute it reads.
#[test]
fn dotted_keys_and_logical_clauses_show_what_they_read() {
    let mut doc = catalog_json();
    doc["workspaces"][0]["apps"][0]["placements"][0]["rules"] = json!([
        {"audience": {"country": "US", "app.version": {"$vgte": "2.0.0"}}, "flow_id": FLOW_US},
        {"audience": {"$or": [{"plan.tier": "pro"}, {"age": {"$gt": 60}}]}, "flow_id": FLOW_NEW}
    ]);
    let catalog = build(&doc);
    let nested =
        json!({"country": "US", "app": {"version": "1.4.0"}, "plan": {"tier": "free"}, "age": 30});
    let (reason, trace) = explain_json(&catalog, "onboarding", "u1", nested);
    assert_eq!(reason, Reason::Default);
    // Clauses are counted in the document's key order (serde_json's: sorted).
    assert_eq!(trace[0]["audience"]["clause_index"], 0, "{trace}");
    assert_eq!(
        trace[0]["audience"]["seen"],
        json!({"app.version": "1.4.0"})
    );
    assert_eq!(
        trace[1]["audience"]["seen"],
        json!({"plan.tier": "free", "age": 30})
    );
    let literal = json!({"country": "US", "app.version": "1.0", "app": {"version": "9.0.0"}});
    let (_, trace) = explain_json(&catalog, "onboarding", "u1", literal);
    assert_eq!(trace[0]["audience"]["seen"], json!({"app.version": "1.0"}));
}

#[test]
fn experiments_show_status_hash_ranges_and_variant() {
    let catalog = build(&catalog_json());
    // Find users on either side of the 50/50 split of the running experiment.
    let user_in = |control: bool| {
        (0..1000)
            .map(|i| format!("user-{i}"))
            .find(|u| (hash_v2(EXP, u) < 0.5) == control)
            .unwrap()
    };
    let holdout = user_in(true);
    let (reason, trace) = explain_json(&catalog, "paywall", &holdout, json!({}));
    assert_eq!(reason, Reason::Holdout);
    let paused = &trace[0]["experiment"];
    assert_eq!(paused["status"], "paused");
    assert_eq!(paused["skipped"], "paused");
    assert!(paused.get("hash").is_none(), "{paused}");
    let running = &trace[1]["experiment"];
    assert_eq!(running["hash"], json!(hash_v2(EXP, &holdout)));
    assert_eq!(
        running["ranges"],
        json!([
            {"variant_id": VAR_CONTROL, "variant_name": "control", "start": 0.0, "end": 0.5},
            {"variant_id": VAR_NEW, "variant_name": "new", "start": 0.5, "end": 1.0}
        ])
    );
    assert_eq!(
        running["variant"],
        json!({"id": VAR_CONTROL, "name": "control", "flow": null})
    );
    assert_eq!(trace[1]["decided"], true);
    let (reason, trace) = explain_json(&catalog, "paywall", &user_in(false), json!({}));
    assert_eq!(reason, Reason::Experiment);
    assert_eq!(trace[1]["experiment"]["variant"]["name"], "new");
}

#[test]
fn namespace_and_coverage_skips_are_named() {
    let mut doc = catalog_json();
    let exp = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"];
    exp["coverage"] = json!(0.2);
    exp["namespace"] = json!(["pricing", 0.0, 0.5]);
    let catalog = build(&doc);
    let app = catalog.app(APP1.parse::<AppId>().unwrap()).unwrap();
    let ns = flowgate_domain::bucketing::Namespace {
        id: "pricing".into(),
        start: 0.0,
        end: 0.5,
    };
    // Coverage scales each variant's range: [0, 0.1) and [0.5, 0.6).
    let ranges = bucket_ranges(2, 0.2, None);
    let mut seen = std::collections::HashSet::new();
    for i in 0..2000 {
        let user = format!("user-{i}");
        let a = Map::new();
        let request = ResolveRequest::new(&user, "s", Platform::Web, &a);
        let e = app.explain("paywall", &request);
        let step = rules(&e.trace)[1].experiment.clone().unwrap();
        let namespace = step.namespace.clone().unwrap();
        assert_eq!(namespace.hash, ns.hash(&user));
        assert_eq!(namespace.inside, ns.contains(&user));
        let expected = if !ns.contains(&user) {
            Some(Skipped::OutsideNamespace)
        } else if choose_variation(hash_v2(EXP, &user), &ranges).is_none() {
            Some(Skipped::OutsideCoverage)
        } else {
            None
        };
        assert_eq!(step.skipped, expected, "{user}");
        assert_eq!(step.variant.is_some(), expected.is_none());
        // Skipped: no rule decides, the placement has no default.
        if expected.is_some() {
            assert_eq!(e.reason, Reason::NoRuleMatched);
            assert_eq!(e.trace.last(), Some(&Step::Default { default: None }));
        }
        seen.insert(format!("{expected:?}"));
    }
    assert_eq!(seen.len(), 3, "every branch was taken: {seen:?}");
}

#[test]
fn unpublished_and_unknown_placements_have_their_reasons() {
    let catalog = build(&catalog_json());
    let (reason, trace) = explain_json(&catalog, "broken", "u1", json!({}));
    assert_eq!(reason, Reason::FlowUnpublished);
    assert_eq!(trace[0]["flow"]["flow_version_id"], Value::Null);
    let (reason, trace) = explain_json(&catalog, "nope", "u1", json!({}));
    assert_eq!(reason, Reason::UnknownPlacement);
    assert_eq!(trace, json!([]));
    let (reason, _) = explain_json(&catalog, "empty", "u1", json!({}));
    assert_eq!(reason, Reason::NoRuleMatched);
}

/// The human form names the clause, the value and the variant.
#[test]
fn steps_display_for_people() {
    let catalog = build(&catalog_json());
    let app = catalog.app(APP1.parse::<AppId>().unwrap()).unwrap();
    let a = attrs(json!({"country": "DE"}));
    let e = app.explain(
        "onboarding",
        &ResolveRequest::new("u1", "s", Platform::Ios, &a),
    );
    let lines: Vec<String> = e.trace.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines[0],
        r#"rule 0: audience did not match at clause 0 {"country":{"$in":["US","CA"]}}: saw country = "DE""#
    );
    assert!(lines[2].starts_with("default: flow "), "{lines:?}");
}

/// D28: a rule that is off is one step saying so (nothing of it is read), and the walk goes on.
#[test]
fn a_rule_that_is_off_says_so_and_the_walk_goes_on() {
    let mut doc = catalog_json();
    doc["workspaces"][0]["apps"][0]["placements"][0]["rules"][0]["enabled"] = json!(false);
    let catalog = build(&doc);
    let (reason, trace) = explain_json(&catalog, "onboarding", "u1", json!({"country": "US"}));
    assert_eq!(reason, Reason::Default, "the US rule would have decided");
    assert_eq!(trace[0], json!({"rule": 0, "off": true}));
    assert_eq!(trace[1]["rule"], json!(1));
    assert_eq!(trace[1]["audience"]["matched"], json!(false));
    assert_eq!(
        trace[2],
        json!({"default": {"flow_id": FLOW_DEFAULT, "flow_version_id": V_DEFAULT_1}})
    );
    let app = catalog.app(APP1.parse::<AppId>().unwrap()).unwrap();
    let a = attrs(json!({"country": "US"}));
    let e = app.explain(
        "onboarding",
        &ResolveRequest::new("u1", "s", Platform::Ios, &a),
    );
    assert_eq!(e.trace[0].to_string(), "rule 0: off; skipped");
    assert!(
        rules(&e.trace).iter().all(|r| r.rule != 0),
        "no rule step for it"
    );

    // An experiment's rule that is off shows no bucketing: its experiment is not read.
    let mut doc = catalog_json();
    doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["enabled"] = json!(false);
    let (reason, trace) = explain_json(&build(&doc), "paywall", "u1", json!({}));
    assert_eq!(reason, Reason::NoRuleMatched);
    assert_eq!(trace[1], json!({"rule": 1, "off": true}));
}
