//! Resolver semantics (D3, D5, D6, D8) over the fixture catalog.

use flowgate_domain::bucketing::{choose_variation, hash_v2};
use flowgate_domain::events::{EventSource, EventType, NoFlowReason};
use flowgate_domain::ids::{AppId, EventId};
use flowgate_domain::resolve::{dedup_keys, BatchError, MAX_BATCH_KEYS};
use flowgate_domain::{Catalog, Platform, Resolution, ResolveMode, ResolveRequest};
use serde_json::{json, Map, Value};
use time::macros::datetime;

use crate::fixtures::*;

fn app1(catalog: &Catalog) -> &flowgate_domain::catalog::App {
    catalog.app(APP1.parse::<AppId>().unwrap()).unwrap()
}

fn attrs(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn served(r: &Resolution<'_>) -> Option<String> {
    r.version().map(|v| v.flow_id().to_string())
}

#[test]
fn first_matching_rule_decides() {
    let catalog = build(&catalog_json());
    let app = app1(&catalog);
    let us = attrs(json!({"country": "US"}));
    let r = app.resolve(
        "onboarding",
        &ResolveRequest::new("u1", "s1", Platform::Ios, &us),
        ResolveMode::Normal,
    );
    assert_eq!(served(&r).as_deref(), Some(FLOW_US));
    let v = r.version().unwrap();
    assert_eq!(
        v.id().to_string(),
        V_US_2,
        "the published version, not the latest listed"
    );
    assert_eq!((v.version(), v.schema_version()), (2, 3));
    assert!(r.assignment().is_none());
}

#[test]
fn default_flow_when_no_rule_matches() {
    let catalog = build(&catalog_json());
    let de = attrs(json!({"country": "DE"}));
    let r = app1(&catalog).resolve(
        "onboarding",
        &ResolveRequest::new("u1", "s1", Platform::Web, &de),
        ResolveMode::Normal,
    );
    assert_eq!(served(&r).as_deref(), Some(FLOW_DEFAULT));
}

#[test]
fn identity_fields_are_attributes_and_win_over_same_named_attributes() {
    let catalog = build(&catalog_json());
    let app = app1(&catalog);
    let none = Map::new();
    let r = app.resolve(
        "onboarding",
        &ResolveRequest::new("u-beta-1", "s", Platform::Ios, &none),
        ResolveMode::Normal,
    );
    assert_eq!(
        served(&r).as_deref(),
        Some(FLOW_NEW),
        "saved group via identity user_id"
    );
    // A client cannot claim another user id through attributes (D3.6).
    let spoof = attrs(json!({"user_id": "u-beta-1"}));
    let r = app.resolve(
        "onboarding",
        &ResolveRequest::new("someone", "s", Platform::Ios, &spoof),
        ResolveMode::Normal,
    );
    assert_eq!(served(&r).as_deref(), Some(FLOW_DEFAULT));
}

#[test]
fn device_platform_reads_as_the_requests_platform_whatever_the_attributes_say() {
    use flowgate_domain::conditions::Attributes;
    let spoof = attrs(json!({"device_platform": "web", "plan": "pro"}));
    for platform in Platform::ALL {
        let request = ResolveRequest::new("u", "s", platform, &spoof);
        assert_eq!(
            request.get("device_platform"),
            Some(&json!(platform.as_str())),
            "{platform:?}"
        );
        assert_eq!(request.get("plan"), Some(&json!("pro")));
    }
}

#[test]
fn user_and_session_ids_read_as_the_requests_whatever_the_attributes_say() {
    use flowgate_domain::conditions::Attributes;
    let spoof = attrs(json!({"user_id": "other", "session_id": "other-s", "plan": "pro"}));
    let request = ResolveRequest::new("u-1", "s-1", Platform::Web, &spoof);
    // Made on first read, then the same value on every later one.
    for _ in 0..2 {
        assert_eq!(request.get("user_id"), Some(&json!("u-1")));
        assert_eq!(request.get("session_id"), Some(&json!("s-1")));
    }
    assert_eq!(request.get("plan"), Some(&json!("pro")));
    assert_eq!((request.user_id(), request.session_id()), ("u-1", "s-1"));
}

/// Finds a user id assigned to variant `want` of the fixture experiment, using GrowthBook's
/// formula independently of the resolver.
fn user_in_variant(want: usize) -> String {
    let ranges = flowgate_domain::bucketing::bucket_ranges(2, 1.0, Some(&[0.5, 0.5]));
    (0..10_000)
        .map(|i| format!("user-{i}"))
        .find(|u| choose_variation(hash_v2(EXP, u), &ranges) == Some(want))
        .unwrap()
}

#[test]
fn paused_experiment_is_skipped_and_running_one_assigns() {
    let catalog = build(&catalog_json());
    let app = app1(&catalog);
    let none = Map::new();
    let new_user = user_in_variant(1);
    let r = app.resolve(
        "paywall",
        &ResolveRequest::new(&new_user, "s", Platform::Android, &none),
        ResolveMode::Normal,
    );
    assert_eq!(served(&r).as_deref(), Some(FLOW_NEW));
    let a = r.assignment().unwrap();
    assert_eq!(
        a.experiment.id().to_string(),
        EXP,
        "the paused experiment never assigns"
    );
    assert_eq!(
        (a.variant.id().to_string().as_str(), a.variant.name()),
        (VAR_NEW, "new")
    );
}

#[test]
fn holdout_is_no_flow_with_experiment_fields_and_event() {
    let catalog = build(&catalog_json());
    let app = app1(&catalog);
    let none = Map::new();
    let control = user_in_variant(0);
    let request = ResolveRequest::new(&control, "sess", Platform::Web, &none);
    let r = app.resolve("paywall", &request, ResolveMode::Normal);
    assert!(r.version().is_none());
    assert_eq!(r.no_flow_reason(), Some(NoFlowReason::Holdout));
    assert_eq!(r.assignment().unwrap().variant.name(), "control");

    let at = datetime!(2026-11-21 10:00 UTC);
    let event = r
        .no_flow_event(app, "paywall", &request, EventId::new_v7(at), at)
        .unwrap();
    assert_eq!(event.event_type, EventType::ResolveNoFlow);
    assert_eq!(event.source, EventSource::Server);
    assert_eq!(event.reason, Some(NoFlowReason::Holdout));
    assert_eq!(event.placement_key.as_deref(), Some("paywall"));
    assert_eq!(event.user_id, control);
    assert_eq!(event.session_id, "sess");
    assert_eq!(event.experiment_id.as_deref(), Some(EXP));
    assert_eq!(event.variant_id.as_deref(), Some(VAR_CONTROL));
    assert_eq!(event.variant_name.as_deref(), Some("control"));
    assert_eq!(event.occurred_at, at);
    assert_eq!(event.event_id.0.get_version_num(), 7);
}

#[test]
fn served_flow_records_no_event() {
    let catalog = build(&catalog_json());
    let app = app1(&catalog);
    let none = Map::new();
    let request = ResolveRequest::new("u", "s", Platform::Web, &none);
    let r = app.resolve("onboarding", &request, ResolveMode::Normal);
    let at = datetime!(2026-11-21 10:00 UTC);
    assert!(r
        .no_flow_event(app, "onboarding", &request, EventId::new_v7(at), at)
        .is_none());
}

#[test]
fn no_flow_reasons() {
    let catalog = build(&catalog_json());
    let app = app1(&catalog);
    let none = Map::new();
    let req = ResolveRequest::new("u", "s", Platform::Ios, &none);
    let reason = |key: &str| app.resolve(key, &req, ResolveMode::Normal).no_flow_reason();
    assert_eq!(reason("nope"), Some(NoFlowReason::UnknownPlacement));
    assert_eq!(reason("empty"), Some(NoFlowReason::NoRuleMatched));
    assert_eq!(reason("broken"), Some(NoFlowReason::FlowUnpublished));
    assert_eq!(reason("onboarding"), None);
}

#[test]
fn export_serves_the_default_flow_only() {
    let catalog = build(&catalog_json());
    let app = app1(&catalog);
    let us = attrs(json!({"country": "US"}));
    let req = ResolveRequest::new("u-beta-1", "s", Platform::Ios, &us);
    let r = app.resolve("onboarding", &req, ResolveMode::Export);
    assert_eq!(
        served(&r).as_deref(),
        Some(FLOW_DEFAULT),
        "audiences skipped"
    );
    // Deterministic across identities.
    let other = ResolveRequest::new("x", "y", Platform::Web, &us);
    assert_eq!(
        served(&app.resolve("onboarding", &other, ResolveMode::Export)).as_deref(),
        Some(FLOW_DEFAULT)
    );
    // Experiments skipped; no default → no flow.
    let r = app.resolve("paywall", &req, ResolveMode::Export);
    assert_eq!(r.no_flow_reason(), Some(NoFlowReason::NoRuleMatched));
    assert!(r.assignment().is_none());
    // "broken" has a published default even though its rule targets a draft.
    assert_eq!(
        served(&app.resolve("broken", &req, ResolveMode::Export)).as_deref(),
        Some(FLOW_DEFAULT)
    );
}

#[test]
fn batch_dedups_keeping_first_occurrence_and_marks_unpublished_as_error() {
    let catalog = build(&catalog_json());
    let app = app1(&catalog);
    let none = Map::new();
    let req = ResolveRequest::new("u", "s", Platform::Ios, &none);
    let keys = [
        "broken",
        "onboarding",
        "broken",
        "nope",
        "onboarding",
        "empty",
    ];
    let entries = app.resolve_batch(&keys, &req).unwrap();
    let got: Vec<_> = entries
        .iter()
        .map(|e| (e.placement_key, e.error()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("broken", Some("flow_unpublished")),
            ("onboarding", None),
            ("nope", None),
            ("empty", None)
        ]
    );
    assert_eq!(
        served(&entries[1].resolution).as_deref(),
        Some(FLOW_DEFAULT)
    );
    assert_eq!(
        entries[2].resolution.no_flow_reason(),
        Some(NoFlowReason::UnknownPlacement)
    );
}

#[test]
fn batch_limits() {
    let distinct: Vec<String> = (0..MAX_BATCH_KEYS).map(|i| format!("k{i}")).collect();
    assert_eq!(dedup_keys(&distinct).unwrap().len(), 50);
    let mut with_dupes = distinct.clone();
    with_dupes.extend(distinct.iter().cloned());
    assert_eq!(
        dedup_keys(&with_dupes).unwrap().len(),
        50,
        "50 after de-duplication is fine"
    );
    let mut too_many = distinct;
    too_many.push("k50".into());
    assert_eq!(
        dedup_keys(&too_many),
        Err(BatchError::TooManyPlacements { distinct: 51 })
    );
    assert_eq!(dedup_keys::<&str>(&[]), Err(BatchError::Empty));
    assert!(matches!(
        dedup_keys(&["ok", "bad key"]),
        Err(BatchError::InvalidKey { index: 1, .. })
    ));
}

#[test]
fn coverage_and_namespace_exclude_users_and_the_walk_continues() {
    let mut doc = catalog_json();
    let exp = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"];
    exp["coverage"] = json!(0.0);
    doc["workspaces"][0]["apps"][0]["placements"][1]["default_flow_id"] = json!(FLOW_DEFAULT);
    let catalog = build(&doc);
    let none = Map::new();
    for i in 0..200 {
        let u = format!("user-{i}");
        let r = app1(&catalog).resolve(
            "paywall",
            &ResolveRequest::new(&u, "s", Platform::Ios, &none),
            ResolveMode::Normal,
        );
        assert_eq!(
            served(&r).as_deref(),
            Some(FLOW_DEFAULT),
            "coverage 0 assigns nobody"
        );
    }

    let mut doc = catalog_json();
    let exp = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"];
    exp["namespace"] = json!(["pricing", 0.0, 0.5]);
    let catalog = build(&doc);
    let ns = flowgate_domain::bucketing::Namespace {
        id: "pricing".into(),
        start: 0.0,
        end: 0.5,
    };
    let (mut inside, mut outside) = (0, 0);
    for i in 0..400 {
        let u = format!("user-{i}");
        let r = app1(&catalog).resolve(
            "paywall",
            &ResolveRequest::new(&u, "s", Platform::Ios, &none),
            ResolveMode::Normal,
        );
        if ns.contains(&u) {
            inside += 1;
            assert!(r.assignment().is_some(), "{u} is in the namespace");
        } else {
            outside += 1;
            assert_eq!(
                r.no_flow_reason(),
                Some(NoFlowReason::NoRuleMatched),
                "{u} is outside the namespace"
            );
        }
    }
    assert!(
        inside > 100 && outside > 100,
        "both sides exercised: {inside}/{outside}"
    );
}

#[test]
fn flow_schema_is_served_byte_for_byte() {
    let text = catalog_json().to_string();
    let catalog = Catalog::build(serde_json::from_str(&text).unwrap()).unwrap();
    let none = Map::new();
    let us = attrs(json!({"country": "CA"}));
    let _ = none;
    let r = app1(&catalog).resolve(
        "onboarding",
        &ResolveRequest::new("u", "s", Platform::Ios, &us),
        ResolveMode::Normal,
    );
    let schema = r.version().unwrap().flow_schema().get();
    assert!(
        schema.contains("12345678901234567890"),
        "integers beyond 2^53 unchanged: {schema}"
    );
    assert_eq!(
        r.version().unwrap().fonts_json().get(),
        r#"[{"family":"Inter","weight":400,"style":"normal","url":"https://cdn.example.com/inter.woff2"}]"#
    );
}

/// The fixture with rule `rule` of placement `placement` (by position in the fixture) off.
fn with_rule_off(placement: usize, rule: usize) -> Value {
    let mut doc = catalog_json();
    doc["workspaces"][0]["apps"][0]["placements"][placement]["rules"][rule]["enabled"] =
        json!(false);
    doc
}

/// D28: a rule that is off is skipped as a rule whose experiment is not running is: the walk
/// goes on to the next rule, then to the default flow.
#[test]
fn a_rule_that_is_off_is_skipped_for_the_next_rule_or_the_default() {
    let on = build(&catalog_json());
    let off = build(&with_rule_off(0, 0));
    let rules = app1(&off).placement("onboarding").unwrap().rules();
    assert_eq!(
        rules.iter().map(|r| r.enabled()).collect::<Vec<_>>(),
        [false, true]
    );
    let resolve = |c: &Catalog, user: &str, country: &str| {
        let a = attrs(json!({ "country": country }));
        let r = app1(c).resolve(
            "onboarding",
            &ResolveRequest::new(user, "s1", Platform::Ios, &a),
            ResolveMode::Normal,
        );
        served(&r)
    };
    assert_eq!(resolve(&on, "u1", "US").as_deref(), Some(FLOW_US));
    // The US rule is off: a beta user gets the next rule's flow, anyone else the default.
    assert_eq!(resolve(&off, "u-beta-1", "US").as_deref(), Some(FLOW_NEW));
    assert_eq!(resolve(&off, "u1", "US").as_deref(), Some(FLOW_DEFAULT));
    assert_eq!(resolve(&off, "u1", "DE").as_deref(), Some(FLOW_DEFAULT));
}

#[test]
fn an_experiment_whose_rule_is_off_assigns_no_one() {
    let off = build(&with_rule_off(1, 1));
    let none = attrs(json!({}));
    for i in 0..200 {
        let user = format!("user-{i}");
        let r = app1(&off).resolve(
            "paywall",
            &ResolveRequest::new(&user, "s1", Platform::Ios, &none),
            ResolveMode::Normal,
        );
        // The paused experiment before it is skipped too, and the paywall has no default.
        assert!(r.assignment().is_none(), "{user}");
        assert_eq!(r.no_flow_reason(), Some(NoFlowReason::NoRuleMatched));
    }
    // Batch resolve walks the same rules.
    let batch = app1(&off)
        .resolve_batch(
            &["paywall"],
            &ResolveRequest::new("user-1", "s1", Platform::Ios, &none),
        )
        .unwrap();
    assert!(batch[0].resolution.assignment().is_none());
}

/// D32: the reason OpenFeature reports, from the same evaluation as resolve: a rule's audience
/// (`TARGETING_MATCH`), the default or nothing (`DEFAULT`), an experiment (`SPLIT`, a holdout
/// included); the resolution is resolve's.
#[test]
fn the_reason_names_what_decided() {
    use flowgate_domain::ResolveReason::{Default, Split, TargetingMatch};
    let catalog = build(&catalog_json());
    let app = app1(&catalog);
    let reason = |key: &str, user: &str, country: &str| {
        let attributes = attrs(json!({"country": country}));
        let request = ResolveRequest::new(user, "s", Platform::Ios, &attributes);
        let placement = app.placement(key).unwrap();
        let (resolution, reason) = placement.resolve_with_reason(app, &request, None);
        let resolved = app.resolve(key, &request, ResolveMode::Normal);
        assert_eq!(served(&resolution), served(&resolved), "{key} {user}");
        (reason, reason.as_str())
    };
    assert_eq!(
        reason("onboarding", "u1", "US"),
        (TargetingMatch, "TARGETING_MATCH")
    );
    assert_eq!(reason("onboarding", "u-beta-1", "DE").0, TargetingMatch);
    assert_eq!(reason("onboarding", "u1", "DE"), (Default, "DEFAULT"));
    assert_eq!(reason("empty", "u1", "DE").0, Default);
    assert_eq!(
        reason("paywall", &user_in_variant(1), "DE"),
        (Split, "SPLIT")
    );
    assert_eq!(
        reason("paywall", &user_in_variant(0), "DE").0,
        Split,
        "a holdout"
    );
}
