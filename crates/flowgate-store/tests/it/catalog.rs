//! Catalog writes and loads beyond the contract suite (`flowgate_contract_tests::catalog_source`,
//! run on both backends): idempotence, rule replacement, a dangling reference, revisions per
//! table, rules that are off (D28) and the console's changes written through the import.

use std::path::Path;

use flowgate_control::import::{dry_run_text, import_text, FileFormat};
use flowgate_domain::catalog::{CatalogChange, CatalogData, ExperimentStatus, PlacementData};
use flowgate_domain::ids::{AppId, FlowId};
use flowgate_domain::ports::{CatalogSource, KeyStore, StoreError};
use flowgate_domain::{Catalog, Platform, ResolveMode, ResolveRequest};
use time::OffsetDateTime;

use crate::support::{self, catalog, WS1};

/// `data` in the store's order (workspaces, apps, flows by id; versions by number; placements
/// by key; keys by creation), timestamps at microseconds, revision 0: what a load returns.
pub fn normalized(mut data: CatalogData) -> String {
    data.revision = 0;
    data.workspaces.sort_by_key(|w| w.id);
    for ws in &mut data.workspaces {
        ws.apps.sort_by_key(|a| a.id);
        for app in &mut ws.apps {
            app.flows.sort_by_key(|f| f.id);
            for flow in &mut app.flows {
                flow.versions.sort_by_key(|v| v.version);
            }
            app.placements.sort_by(|a, b| a.key.cmp(&b.key));
        }
    }
    let micros = |t: OffsetDateTime| {
        t.replace_nanosecond(t.nanosecond() / 1000 * 1000)
            .expect("valid")
            .to_offset(time::UtcOffset::UTC)
    };
    for key in &mut data.api_keys {
        key.created_at = micros(key.created_at);
        key.revoked_at = key.revoked_at.map(micros);
    }
    data.api_keys.sort_by_key(|k| (k.created_at, k.id));
    serde_json::to_string_pretty(&data).expect("serialise")
}

backend_tests! {
    async fn an_empty_store_loads_an_empty_catalog(db) {
        let loaded = db.store.load_catalog().await.expect("load");
        assert_eq!(loaded.revision, 1);
        assert!(loaded.workspaces.is_empty());
        Catalog::build(loaded).expect("an empty catalog builds");
    }

    async fn writing_the_same_catalog_twice_changes_nothing(db) {
        let data = catalog();
        db.store.replace_catalog(&data).await.expect("first write");
        let first = db.store.load_catalog().await.expect("load");
        db.store.replace_catalog(&data).await.expect("second write");
        let second = db.store.load_catalog().await.expect("load");
        assert_eq!(normalized(first), normalized(second));
        assert_eq!(db.count("SELECT count(*) AS n FROM rules").await, 5);
        assert_eq!(db.count("SELECT count(*) AS n FROM variants").await, 3);
        assert_eq!(db.count("SELECT count(*) AS n FROM placements").await, 3);
    }

    async fn a_rule_list_replaces_the_stored_one(db) {
        let mut data = catalog();
        db.store.replace_catalog(&data).await.expect("first write");
        let app = &mut data.workspaces[0].apps[0];
        let onboarding = app.placements.iter_mut().find(|p| p.key == "onboarding").expect("placement");
        onboarding.rules.truncate(1);
        onboarding.rules[0].audience = Some(serde_json::json!({"country": "CA"}));
        let paywall = app.placements.iter_mut().find(|p| p.key == "paywall").expect("placement");
        paywall.rules.remove(0);
        let experiment = paywall.rules[0].experiment.as_mut().expect("experiment");
        experiment.variants.reverse();
        experiment.variants[0].weight = 3.0;
        db.store.replace_catalog(&data).await.expect("second write");

        let loaded = db.store.load_catalog().await.expect("load");
        assert_eq!(normalized(loaded), normalized(data));
        assert_eq!(db.count("SELECT count(*) AS n FROM rules").await, 2);
    }

    async fn a_dangling_reference_writes_nothing(db) {
        let mut data = catalog();
        data.workspaces[0].apps[0].placements[0].default_flow_id =
            Some("30000000-0000-4000-8000-0000000000ff".parse().expect("uuid"));
        let err = db.store.replace_catalog(&data).await.expect_err("rejected");
        assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
        let loaded = db.store.load_catalog().await.expect("load");
        assert!(loaded.workspaces.is_empty(), "the transaction rolled back");
        assert_eq!(loaded.revision, 1);
    }

    async fn placements_load_in_byte_order_whatever_the_collation(db) {
        // Upper case before lower case, and `.`, `:` and `_` apart, as bytes order them; a
        // locale's collation (PostgreSQL's en_US) orders these otherwise.
        let mut data = catalog();
        let app = &mut data.workspaces[0].apps[0];
        for key in ["a_b", "Paywall.main:v2", "a:b", "Zeta", "a.b"] {
            let mut placement = app.placements[0].clone();
            placement.key = key.to_owned();
            app.placements.push(placement);
        }
        db.store.replace_catalog(&data).await.expect("write");
        let loaded = db.store.load_catalog().await.expect("load");
        let keys: Vec<&str> = loaded.workspaces[0].apps[0]
            .placements
            .iter()
            .map(|p| p.key.as_str())
            .collect();
        assert_eq!(
            keys,
            ["Paywall.main:v2", "Zeta", "a.b", "a:b", "a_b", "empty", "onboarding", "paywall"]
        );
    }

    async fn keys_written_with_the_catalog_come_back_at_microseconds_in_utc(db) {
        // A catalog write carries its keys too (an import): times finer than a microsecond are
        // cut, and an offset other than UTC is kept as the same instant.
        let mut data = catalog();
        let mut active = support::key_record(WS1, 'a', time::macros::datetime!(2026-01-01 00:00:00.123_456_789 UTC));
        active.name = "ios".to_owned();
        let mut revoked = support::key_record(WS1, 'b', time::macros::datetime!(2026-01-02 00:00 UTC));
        revoked.revoked_at = Some(time::macros::datetime!(2026-01-03 04:05:06.5 +02:00));
        data.api_keys = vec![active.clone(), revoked.clone()];
        db.store.replace_catalog(&data).await.expect("write");
        let loaded = db.store.load_catalog().await.expect("load");
        assert_eq!(normalized(loaded.clone()), normalized(data));
        let stored = loaded.api_keys.iter().find(|k| k.id == revoked.id).expect("revoked key");
        assert_eq!(
            stored.revoked_at.map(|t| t.to_offset(time::UtcOffset::UTC)),
            Some(time::macros::datetime!(2026-01-03 02:05:06.5 UTC))
        );
        let stored = loaded.api_keys.iter().find(|k| k.id == active.id).expect("active key");
        assert_eq!(stored.created_at, time::macros::datetime!(2026-01-01 00:00:00.123_456 UTC));
    }

    async fn a_change_to_one_table_or_none_bumps_the_revision_or_not(db) {
        // The contract suite holds a catalog write and a key's insert and revoke to a new
        // revision; here, the triggers of one table (flows) and a write that changes no row.
        let mut data = catalog();
        db.store.replace_catalog(&data).await.expect("write");
        let before = db.store.revision().await.expect("revision");
        data.workspaces[0].apps[0].flows[0].name = "Renamed".to_owned();
        db.store.replace_catalog(&data).await.expect("write");
        let renamed = db.store.revision().await.expect("revision");
        assert!(renamed > before, "a flow rename: revision {renamed} after {before}");

        let record = support::key_record(WS1, 'k', OffsetDateTime::now_utc());
        db.store.insert_key(record.clone()).await.expect("insert key");
        db.store.revoke_key(record.id, OffsetDateTime::now_utc()).await.expect("revoke");
        let revoked = db.store.revision().await.expect("revision");
        // Revoking again changes no row, so nothing needs reloading.
        db.store.revoke_key(record.id, OffsetDateTime::now_utc()).await.expect("revoke again");
        assert_eq!(db.store.revision().await.expect("revision"), revoked);
    }
}

/// The placement with `key` of the fixture's first app.
fn placement<'a>(data: &'a mut CatalogData, key: &str) -> &'a mut PlacementData {
    data.workspaces[0].apps[0]
        .placements
        .iter_mut()
        .find(|p| p.key == key)
        .expect("the fixture has the placement")
}

fn enabled(data: &mut CatalogData, key: &str) -> Vec<bool> {
    placement(data, key)
        .rules
        .iter()
        .map(|r| r.enabled)
        .collect()
}

const CHANGED_AT: OffsetDateTime = time::macros::datetime!(2026-12-05 12:00 UTC);

backend_tests! {
    async fn a_rule_that_is_off_is_stored_and_loaded_off(db) {
        let mut data = catalog();
        placement(&mut data, "onboarding").rules[1].enabled = false;
        db.store.replace_catalog(&data).await.expect("write");
        assert_eq!(db.count("SELECT count(*) AS n FROM rules WHERE NOT enabled").await, 1);
        let mut loaded = db.store.load_catalog().await.expect("load");
        assert_eq!(enabled(&mut loaded, "onboarding"), [true, false, true]);
        assert_eq!(normalized(loaded), normalized(data.clone()));

        // On again: a change of the catalog, to a new revision.
        let before = db.store.revision().await.expect("revision");
        placement(&mut data, "onboarding").rules[1].enabled = true;
        db.store.replace_catalog(&data).await.expect("write");
        assert!(db.store.revision().await.expect("revision") > before);
        assert_eq!(db.count("SELECT count(*) AS n FROM rules WHERE NOT enabled").await, 0);
    }

    async fn a_rule_written_without_the_column_is_on(db) {
        // The previous release's write names no `enabled` (expand only, D26): its rules are on.
        db.store.replace_catalog(&catalog()).await.expect("write");
        db.execute(
            "INSERT INTO rules (placement_id, position, audience, flow_id, experiment_id) \
             SELECT placement_id, 3, audience, flow_id, experiment_id FROM rules \
             WHERE position = 0 AND flow_id IS NOT NULL",
        )
        .await;
        let mut loaded = db.store.load_catalog().await.expect("load");
        assert_eq!(enabled(&mut loaded, "onboarding"), [true, true, true, true]);
    }

    async fn a_console_change_is_written_by_the_import(db) {
        db.store.replace_catalog(&catalog()).await.expect("write");
        let stored = db.store.load_catalog().await.expect("load");
        let path = Path::new("console-change.json");
        let off = CatalogChange::SetRuleEnabled {
            app: AppId::from_uuid(support::APP1),
            placement: "onboarding".to_owned(),
            rule: 0,
            enabled: false,
        };
        let text = off.apply(&stored).expect("applies").to_pretty_json().expect("serialises");
        let dry = dry_run_text(&db.store, path, FileFormat::Json, &text, CHANGED_AT)
            .await
            .expect("dry run");
        assert_eq!(dry.diff.placements.len(), 1);
        assert_eq!(dry.diff.placements[0].rules[0].change, ["off"]);
        let report = import_text(&db.store, path, FileFormat::Json, &text, CHANGED_AT)
            .await
            .expect("imports");
        assert!(report.changed);
        let mut expected = stored.clone();
        placement(&mut expected, "onboarding").rules[0].enabled = false;
        let loaded = db.store.load_catalog().await.expect("load");
        assert!(loaded.revision > stored.revision);
        assert_eq!(normalized(loaded.clone()), normalized(expected), "that rule and nothing else");

        // Shipping `new` of the running paywall experiment: its users leave it (the dry run
        // says how many), everyone the rule reached gets `new`'s flow, and the experiment stays,
        // concluded.
        let experiment = "50000000-0000-4000-8000-000000000001".parse().expect("uuid");
        let ship = CatalogChange::ShipVariant {
            experiment,
            variant: "60000000-0000-4000-8000-000000000005".parse().expect("uuid"),
        };
        assert_eq!(ship.describe(&loaded), "ship `new` of `paywall-test` (paywall, Acme iOS)");
        let text = ship.apply(&loaded).expect("applies").to_pretty_json().expect("serialises");
        let dry = dry_run_text(&db.store, path, FileFormat::Json, &text, CHANGED_AT)
            .await
            .expect("dry run");
        let shift = dry.diff.experiments.iter().find(|e| e.id == experiment).expect("a shift");
        assert_eq!(shift.status_after, Some(ExperimentStatus::Concluded));
        // Coverage 0.5 of namespace [0, 0.5): about a quarter of the users were in it (as the
        // hash values fall), and all of them leave.
        assert!((shift.leave - 0.25).abs() < 1e-3, "{shift:?}");
        assert_eq!((shift.keep_variant, shift.change_variant, shift.enter), (0.0, 0.0, 0.0));
        import_text(&db.store, path, FileFormat::Json, &text, CHANGED_AT)
            .await
            .expect("imports");
        let mut after = db.store.load_catalog().await.expect("load");
        let rules = &placement(&mut after, "paywall").rules;
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[1].flow_id, Some(FlowId::from_uuid(support::FLOW_US)));
        assert!(rules[1].audience.is_none(), "the experiment rule's audience: everyone");
        let kept = rules[2].experiment.as_ref().expect("the experiment stays");
        assert_eq!(kept.status, ExperimentStatus::Concluded);
        let catalog = Catalog::build(after.clone()).expect("builds");
        let app = catalog.app(AppId::from_uuid(support::APP1)).expect("the app");
        let none = serde_json::Map::new();
        for i in 0..50 {
            let user = format!("user-{i}");
            let request = ResolveRequest::new(&user, "s", Platform::Ios, &none);
            let r = app.resolve("paywall", &request, ResolveMode::Normal);
            assert!(r.assignment().is_none(), "{user}");
            assert_eq!(r.version().map(|v| v.flow_id()), Some(FlowId::from_uuid(support::FLOW_US)));
        }
        // Shipped is shipped: nothing to write.
        assert_eq!(ship.apply(&after).expect_err("no change").code(), "no_change");
    }
}
