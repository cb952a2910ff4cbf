//! Catalog snapshot: lookups, authentication (D1, D9), and whole-document validation with
//! JSON pointers (D2, D13).

use flowgate_domain::catalog::AppAccessError;
use flowgate_domain::events::FlowVersionLookup;
use flowgate_domain::ids::{AppId, FlowVersionId, WorkspaceId};
use flowgate_domain::keys::{AuthError, KeyEnvironment, KeyType};
use flowgate_domain::{Catalog, CatalogData};
use serde_json::json;
use time::macros::datetime;

use crate::fixtures::*;

fn app(id: &str) -> AppId {
    id.parse().unwrap()
}

#[test]
fn lookups() {
    let catalog = build(&catalog_json());
    assert_eq!(catalog.app_count(), 2);
    let a = catalog.app(app(APP1)).unwrap();
    assert_eq!(a.cache_ttl_seconds(), Some(120));
    assert!(a.placement("onboarding").is_some());
    assert_eq!(
        a.placement_keys(),
        ["broken", "empty", "onboarding", "paywall", "welcome"]
    );
    assert!(
        a.placement("Onboarding").is_none(),
        "keys are case-sensitive"
    );
    assert_eq!(catalog.app(app(APP2)).unwrap().cache_ttl_seconds(), None);
    let ws = catalog.workspace(WS1.parse().unwrap()).unwrap();
    assert_eq!(ws.app_ids(), vec![app(APP1)]);
    // Every version counts for events, published or not (D2).
    let v: FlowVersionId = V_UNPUBLISHED_1.parse().unwrap();
    assert_eq!(
        catalog.flow_version(v).unwrap().flow_id().to_string(),
        FLOW_UNPUBLISHED
    );
    assert_eq!(
        catalog
            .flow_of_version(app(APP1), v)
            .map(|f| f.to_string())
            .as_deref(),
        Some(FLOW_UNPUBLISHED)
    );
    assert_eq!(
        catalog.flow_of_version(app(APP2), v),
        None,
        "a version of another app"
    );
    assert!(a
        .flow(FLOW_UNPUBLISHED.parse().unwrap())
        .unwrap()
        .published()
        .is_none());
}

#[test]
fn app_access_distinguishes_unknown_from_foreign() {
    let catalog = build(&catalog_json());
    let ws1: WorkspaceId = WS1.parse().unwrap();
    assert!(catalog.app_for(ws1, app(APP1)).is_ok());
    assert_eq!(
        catalog.app_for(ws1, app(APP2)).err(),
        Some(AppAccessError::Forbidden)
    );
    assert_eq!(
        catalog
            .app_for(ws1, app("20000000-0000-4000-8000-0000000000ff"))
            .err(),
        Some(AppAccessError::NotFound)
    );
}

#[test]
fn authentication_outcomes() {
    let sdk = key(KeyEnvironment::Test, 'a');
    let secret = key(KeyEnvironment::Test, 'b');
    let live = key(KeyEnvironment::Live, 'c');
    let revoked = key(KeyEnvironment::Test, 'd');
    let unknown = key(KeyEnvironment::Test, 'e');
    let mut data = data_from(&catalog_json());
    data.api_keys.push(record(WS1, &sdk, KeyType::Sdk, 1));
    data.api_keys.push(record(WS1, &secret, KeyType::Secret, 2));
    data.api_keys.push(record(WS1, &live, KeyType::Sdk, 3));
    let mut r = record(WS1, &revoked, KeyType::Sdk, 4);
    r.revoked_at = Some(datetime!(2026-02-01 00:00 UTC));
    data.api_keys.push(r);
    let catalog = Catalog::build(data).unwrap();

    let auth = |h: Option<String>| {
        catalog
            .authenticate(h.as_deref(), KeyEnvironment::Test)
            .map(|r| r.id.to_string())
    };
    let bearer = |k: &str| Some(k.to_owned());
    assert_eq!(
        auth(bearer(sdk.expose())),
        Ok(uuid::Uuid::from_u128(1).to_string())
    );
    assert_eq!(auth(None), Err(AuthError::MissingApiKey));
    assert_eq!(
        auth(bearer("fg_test_garbage")),
        Err(AuthError::InvalidApiKey)
    );
    assert_eq!(
        auth(bearer(unknown.expose())),
        Err(AuthError::InvalidApiKey)
    );
    assert_eq!(
        auth(bearer(revoked.expose())),
        Err(AuthError::InvalidApiKey),
        "revoked is like unknown"
    );
    assert_eq!(
        auth(bearer(secret.expose())),
        Err(AuthError::KeyTypeNotAllowed)
    );
    assert_eq!(
        auth(bearer(live.expose())),
        Err(AuthError::KeyEnvironmentMismatch)
    );
    assert_eq!(
        catalog
            .authenticate(bearer(live.expose()).as_deref(), KeyEnvironment::Live)
            .map(|r| r.key_type),
        Ok(KeyType::Sdk)
    );
    assert_eq!(
        AuthError::KeyEnvironmentMismatch.code(),
        "key_environment_mismatch"
    );
}

fn problems(doc: serde_json::Value) -> Vec<(String, String)> {
    let data: CatalogData = data_from(&doc);
    match Catalog::build(data) {
        Ok(_) => Vec::new(),
        Err(e) => e
            .problems
            .into_iter()
            .map(|p| (p.pointer, p.message))
            .collect(),
    }
}

fn pointers(doc: serde_json::Value) -> Vec<String> {
    problems(doc).into_iter().map(|(p, _)| p).collect()
}

const A: &str = "/workspaces/0/apps/0";

#[test]
fn every_problem_is_reported_with_its_pointer() {
    let mut doc = catalog_json();
    let app = &mut doc["workspaces"][0]["apps"][0];
    app["placements"][0]["key"] = json!("bad key!");
    app["placements"][0]["default_flow_id"] = json!(FLOW_APP2);
    app["flows"][0]["published_version"] = json!(9);
    app["flows"][0]["versions"][1]["fonts"][0]["weight"] = json!(950);
    app["flows"][1]["versions"][0]["flow_schema"] = json!([1, 2]);
    app["media_base_url"] = json!("ftp://nope");
    app["name"] = json!("   ");
    let got = problems(doc);
    let expected: Vec<(String, String)> = [
        (
            "name",
            "must be a non-blank name of at most 256 characters, not \"   \"".to_owned(),
        ),
        (
            "media_base_url",
            "must be an http(s) URL of at most 2048 characters, not \"ftp://nope\"".to_owned(),
        ),
        (
            "flows/0/versions/1/fonts/0/weight",
            "must be an integer from 100 to 900, not 950".to_owned(),
        ),
        (
            "flows/0/published_version",
            "version 9 does not exist in this flow".to_owned(),
        ),
        (
            "flows/1/versions/0/flow_schema",
            "must be a JSON object, not [1,2]".to_owned(),
        ),
        (
            "placements/0/key",
            "a placement key has only the characters A-Z a-z 0-9 _ . : -, not \"bad key!\""
                .to_owned(),
        ),
        (
            "placements/0/default_flow_id",
            format!("flow {FLOW_APP2} is not a flow of this app"),
        ),
    ]
    .into_iter()
    .map(|(at, message)| (format!("{A}/{at}"), message))
    .collect();
    assert_eq!(
        got, expected,
        "every problem, each quoting the value it is about"
    );
}

/// Every part of a rule is checked: a rule with two targets whose flow id is dangling reports
/// both; so does a rule whose audience and target are both wrong.
#[test]
fn every_problem_of_a_rule_is_listed() {
    let dangling = "40000000-0000-4000-8000-0000000000ee";
    let mut doc = catalog_json();
    let rules = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"];
    rules[1]["flow_id"] = json!(dangling);
    rules[1]["experiment"]["coverage"] = json!(2);
    let p = format!("{A}/placements/1/rules/1");
    assert_eq!(
        problems(doc),
        vec![
            (
                p.clone(),
                "a rule has exactly one target: flow_id or experiment, not both".to_owned()
            ),
            (
                format!("{p}/flow_id"),
                format!("flow {dangling} is not a flow of this app")
            ),
            (
                format!("{p}/experiment/coverage"),
                "must be a number from 0.0 to 1.0, not 2".to_owned()
            ),
        ]
    );

    let mut doc = catalog_json();
    let rule = &mut doc["workspaces"][0]["apps"][0]["placements"][0]["rules"][0];
    rule["audience"] = json!({"country": {"$in": "US"}});
    rule["flow_id"] = json!(dangling);
    let p = format!("{A}/placements/0/rules/0");
    assert_eq!(
        problems(doc),
        vec![
            (
                format!("{p}/audience/country/$in"),
                "$in expects an array of values, not \"US\"".to_owned()
            ),
            (
                format!("{p}/flow_id"),
                format!("flow {dangling} is not a flow of this app")
            ),
        ]
    );
}

#[test]
fn duplicate_ids_and_keys_are_problems() {
    let mut doc = catalog_json();
    doc["workspaces"][1]["apps"][0]["flows"][0]["id"] = json!(FLOW_US);
    doc["workspaces"][1]["apps"][0]["placements"][0]["default_flow_id"] = json!(FLOW_US);
    doc["workspaces"][0]["apps"][0]["flows"][0]["versions"][0]["version"] = json!(2);
    doc["workspaces"][0]["apps"][0]["placements"][3]["key"] = json!("paywall");
    let got = pointers(doc);
    assert_eq!(
        got,
        vec![
            format!("{A}/flows/0/versions/1/version"),
            format!("{A}/placements/3/key"),
            "/workspaces/1/apps/0/flows/0/id".to_string(),
        ]
    );
}

#[test]
fn rule_and_experiment_problems() {
    let mut doc = catalog_json();
    let rules = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"];
    rules[0]["flow_id"] = json!(FLOW_US); // both targets
    let exp = &mut rules[1]["experiment"];
    exp["coverage"] = json!(1.5);
    exp["variants"][0]["weight"] = json!(-0.5);
    exp["namespace"] = json!(["", 0.5, 0.2]);
    let got = pointers(doc);
    let p = format!("{A}/placements/1/rules");
    assert_eq!(
        got,
        vec![
            format!("{p}/0"),
            format!("{p}/1/experiment/coverage"),
            format!("{p}/1/experiment/namespace"),
            format!("{p}/1/experiment/variants/0/weight"),
        ]
    );

    let mut doc = catalog_json();
    let exp = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"];
    exp["variants"] = json!([]);
    let got = problems(doc);
    assert_eq!(
        got[0].0,
        format!("{A}/placements/1/rules/1/experiment/variants")
    );
    assert!(got[0].1.contains("at least one variant"), "{got:?}");

    let mut doc = catalog_json();
    doc["workspaces"][0]["apps"][0]["placements"][3]["rules"] = json!([{"audience": {}}]);
    assert_eq!(pointers(doc), vec![format!("{A}/placements/3/rules/0")]);
}

/// D29: a variant's `flow_version` is one its flow has, and not on a holdout; an experiment
/// ends after it starts. The pinned version is served whether published or not.
#[test]
fn pinned_versions_and_schedules_are_checked_and_served() {
    let mut doc = catalog_json();
    let exp = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"];
    exp["variants"][0]["flow_version"] = json!(1); // the holdout
    exp["variants"][1]["flow_version"] = json!(7); // New has version 1 only
    exp["starts_at"] = json!("2026-12-02T00:00:00Z");
    exp["ends_at"] = json!("2026-12-01T00:00:00Z");
    let p = format!("{A}/placements/1/rules/1/experiment");
    assert_eq!(
        problems(doc),
        vec![
            (
                format!("{p}/variants/0/flow_version"),
                "a holdout (no flow_id) shows no flow version, not 1".to_owned()
            ),
            (
                format!("{p}/variants/1/flow_version"),
                format!("flow {FLOW_NEW} has no version 7")
            ),
            (
                format!("{p}/ends_at"),
                "must be after starts_at (2026-12-02T00:00:00Z), not 2026-12-01T00:00:00Z"
                    .to_owned()
            ),
        ]
    );

    // Version 1 of US onboarding (which publishes 2), pinned on the paused experiment's variant
    // and the experiment running: its users get version 1.
    let mut doc = catalog_json();
    let rule = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][0];
    rule["experiment"]["status"] = json!("running");
    rule["experiment"]["variants"][0]["flow_version"] = json!(1);
    let catalog = build(&doc);
    let app = catalog.app(app(APP1)).expect("the app");
    let attributes = serde_json::Map::new();
    let request = flowgate_domain::resolve::ResolveRequest::new(
        "u1",
        "s1",
        flowgate_domain::identity::Platform::Ios,
        &attributes,
    );
    let resolution = app.resolve(
        "paywall",
        &request,
        flowgate_domain::resolve::ResolveMode::Normal,
    );
    let version = resolution.version().expect("a flow");
    assert_eq!(version.id().to_string(), V_US_1);
    assert_eq!(version.version(), 1);
}

#[test]
fn invalid_audiences_are_rejected_at_build_with_nested_pointers() {
    let mut doc = catalog_json();
    let rules = &mut doc["workspaces"][0]["apps"][0]["placements"][0]["rules"];
    rules[0]["audience"] = json!({"country": {"$inn": ["US"]}});
    rules[1]["audience"] = json!({"$and": [{"name": {"$regex": "(?=look-ahead)"}}]});
    let got = pointers(doc);
    let p = format!("{A}/placements/0/rules");
    assert_eq!(
        got,
        vec![
            format!("{p}/0/audience/country/$inn"),
            format!("{p}/1/audience/$and/0/name/$regex")
        ]
    );
}

#[test]
fn keys_of_unknown_workspaces_and_duplicates_are_problems() {
    let k = key(KeyEnvironment::Test, 'z');
    let mut data = data_from(&catalog_json());
    data.api_keys.push(record(WS1, &k, KeyType::Sdk, 1));
    data.api_keys.push(record(WS1, &k, KeyType::Sdk, 2));
    data.api_keys.push(record(
        "10000000-0000-4000-8000-0000000000ff",
        &key(KeyEnvironment::Test, 'y'),
        KeyType::Sdk,
        3,
    ));
    let err = Catalog::build(data).unwrap_err();
    let got: Vec<_> = err.problems.iter().map(|p| p.pointer.as_str()).collect();
    assert_eq!(got, vec!["/api_keys/1/digest", "/api_keys/2/workspace_id"]);
}

#[test]
fn weights_are_normalised_by_their_sum() {
    let mut doc = catalog_json();
    let exp = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"];
    exp["variants"][0]["weight"] = json!(3);
    exp["variants"][1]["weight"] = json!(1);
    exp["coverage"] = json!(0.5);
    let catalog = build(&doc);
    let placement = catalog
        .app(app(APP1))
        .unwrap()
        .placement("paywall")
        .unwrap();
    let flowgate_domain::catalog::Target::Experiment(e) = &placement.rules()[1].target() else {
        panic!("experiment")
    };
    let ranges: Vec<(f64, f64)> = e.ranges().iter().map(|r| (r.start, r.end)).collect();
    assert_eq!(ranges, vec![(0.0, 0.375), (0.75, 0.875)]);
    assert_eq!(e.seed(), EXP, "seed defaults to the experiment id");
}

/// An experiment's analysis settings (D27): each wrong value refused at its pointer, quoted.
#[test]
fn invalid_analysis_settings_are_refused_with_the_value_quoted() {
    let at = "/workspaces/0/apps/0/placements/1/rules/1/experiment/analysis";
    let cases = [
        (
            serde_json::json!({"primary_metric": "purchases"}),
            "primary_metric",
            "\"purchases\" is not a metric: one of flow_load_start",
        ),
        (
            serde_json::json!({"guardrail_metrics": ["revenue", "refund"]}),
            "guardrail_metrics/1",
            "\"refund\" is not a metric",
        ),
        (
            serde_json::json!({"guardrail_metrics": ["revenue", "revenue"]}),
            "guardrail_metrics/1",
            "\"revenue\" is listed twice",
        ),
        (
            serde_json::json!({"primary_metric": "revenue", "guardrail_metrics": ["revenue"]}),
            "guardrail_metrics/0",
            "\"revenue\" is the primary metric already",
        ),
        (
            serde_json::json!({"minimum_users": 0}),
            "minimum_users",
            "must be at least 1, not 0",
        ),
    ];
    for (analysis, pointer, quoted) in cases {
        let mut doc = catalog_json();
        doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"]["analysis"] =
            analysis.clone();
        let error = Catalog::build(data_from(&doc))
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains(&format!("{at}/{pointer}")) && error.contains(quoted),
            "{analysis}: {error}"
        );
    }
    // Every metric an SDK sends, and revenue, is accepted.
    let mut doc = catalog_json();
    doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"]["analysis"] = serde_json::json!({"primary_metric": "revenue",
            "guardrail_metrics": ["custom", "purchase_fail", "flow_dismiss"],
            "sequential": false, "minimum_users": 1});
    let catalog = Catalog::build(data_from(&doc)).expect("valid");
    let (_, experiment) = catalog
        .experiment(EXP.parse().expect("uuid"))
        .expect("the experiment");
    assert_eq!(experiment.analysis().primary_metric, "revenue");
    assert!(!experiment.analysis().sequential);
    assert_eq!(experiment.analysis().minimum_users, 1);
}

/// An app's App Store fields (D30): each wrong value refused at its pointer, quoted, and only
/// that problem.
#[test]
fn invalid_app_store_fields_are_refused_with_the_value_quoted() {
    let long = "a".repeat(156);
    let cases = [
        (
            json!({"apple_bundle_id": "com.example app"}),
            "/apple_bundle_id",
            "must be an App Store bundle id, 1 to 155 characters of A-Za-z0-9.- (e.g. \
             \"com.example.app\"), not \"com.example app\""
                .to_owned(),
        ),
        (
            json!({"apple_bundle_id": "com.example_app"}),
            "/apple_bundle_id",
            "not \"com.example_app\"".to_owned(),
        ),
        (
            json!({"apple_bundle_id": ""}),
            "/apple_bundle_id",
            "not \"\"".to_owned(),
        ),
        (
            json!({"apple_bundle_id": long}),
            "/apple_bundle_id",
            format!("not \"{long}\"").chars().take(40).collect(),
        ),
        (
            json!({"apple_bundle_id": "com.example.app",
                   "apple_environments": ["Production", "Staging"]}),
            "/apple_environments/1",
            "\"Staging\" is not an App Store environment: Production or Sandbox".to_owned(),
        ),
        (
            json!({"apple_bundle_id": "com.example.app", "apple_environments": ["sandbox"]}),
            "/apple_environments/0",
            "\"sandbox\" is not an App Store environment".to_owned(),
        ),
        (
            json!({"apple_bundle_id": "com.example.app",
                   "apple_environments": ["Sandbox", "Production", "Sandbox"]}),
            "/apple_environments/2",
            "\"Sandbox\" is listed twice".to_owned(),
        ),
        (
            json!({"apple_environments": ["Sandbox"]}),
            "/apple_environments",
            "[\"Sandbox\"] needs an apple_bundle_id".to_owned(),
        ),
    ];
    for (fields, pointer, quoted) in cases {
        let mut doc = catalog_json();
        for (name, value) in fields.as_object().unwrap() {
            doc["workspaces"][0]["apps"][0][name] = value.clone();
        }
        let found = problems(doc);
        assert_eq!(found.len(), 1, "{fields}: {found:?}");
        assert_eq!(found[0].0, format!("{A}{pointer}"), "{fields}: {found:?}");
        assert!(found[0].1.contains(&quoted), "{fields}: {found:?}");
    }
    // The longest bundle id Apple allows, of every allowed character, and both environments.
    let mut doc = catalog_json();
    let longest = format!("com.Example-9.{}", "a".repeat(141));
    assert_eq!(longest.len(), 155);
    doc["workspaces"][0]["apps"][0]["apple_bundle_id"] = json!(longest);
    doc["workspaces"][0]["apps"][0]["apple_environments"] = json!(["Sandbox", "Production"]);
    assert_eq!(problems(doc), []);
}

/// The getters (D30): no bundle id, no environments; a bundle id alone, `["Production"]`; the
/// listed environments as listed otherwise.
#[test]
fn app_store_environments_default_to_production_with_a_bundle_id() {
    let with = |fields: serde_json::Value| {
        let mut doc = catalog_json();
        for (name, value) in fields.as_object().unwrap() {
            doc["workspaces"][0]["apps"][0][name] = value.clone();
        }
        build(&doc)
    };
    let catalog = with(json!({}));
    let a = catalog.app(app(APP1)).unwrap();
    assert_eq!(a.apple_bundle_id(), None);
    assert!(a.apple_environments().is_empty());

    let catalog = with(json!({"apple_bundle_id": "com.example.acme"}));
    let a = catalog.app(app(APP1)).unwrap();
    assert_eq!(a.apple_bundle_id(), Some("com.example.acme"));
    assert_eq!(a.apple_environments(), ["Production"]);

    let catalog = with(json!({"apple_bundle_id": "com.example.acme",
                              "apple_environments": ["Sandbox"]}));
    assert_eq!(
        catalog.app(app(APP1)).unwrap().apple_environments(),
        ["Sandbox"]
    );
    let catalog = with(json!({"apple_bundle_id": "com.example.acme",
                              "apple_environments": ["Sandbox", "Production"]}));
    let a = catalog.app(app(APP1)).unwrap();
    assert_eq!(a.apple_environments(), ["Sandbox", "Production"]);
    assert_eq!(
        catalog.app(app(APP2)).unwrap().apple_bundle_id(),
        None,
        "per app"
    );
}
