//! Catalog writes and loads: round trip, idempotence, rule replacement, revisions.

use flowgate_domain::catalog::CatalogData;
use flowgate_domain::ports::{CatalogSource, KeyStore, StoreError};
use flowgate_domain::Catalog;
use time::OffsetDateTime;

use crate::support::{self, catalog, APP1, EXACT_SCHEMA, V_US_2, WS1};

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

fn schema_text(data: &CatalogData) -> String {
    data.workspaces
        .iter()
        .flat_map(|w| &w.apps)
        .flat_map(|a| &a.flows)
        .flat_map(|f| &f.versions)
        .find(|v| v.id.to_string() == V_US_2)
        .map(|v| v.flow_schema.get().to_owned())
        .expect("the version is there")
}

backend_tests! {
    async fn round_trip_is_exact(db) {
        let written = catalog();
        db.store.replace_catalog(&written).await.expect("write");
        let loaded = db.store.load_catalog().await.expect("load");

        assert!(loaded.revision > 1, "writes bumped the revision: {}", loaded.revision);
        // D2: the published flow_schema comes back byte for byte.
        assert_eq!(schema_text(&loaded), EXACT_SCHEMA);
        assert_eq!(normalized(loaded.clone()), normalized(written));
        // And the domain accepts it as a catalog.
        let built = Catalog::build(loaded).expect("the loaded catalog builds");
        assert!(built.app(APP1.parse().expect("uuid")).is_some());
    }

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
        let paywall = app.placements.iter_mut().find(|p| p.key == "Paywall.main:v2").expect("placement");
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

    async fn every_write_bumps_the_revision(db) {
        let mut last = db.store.revision().await.expect("revision");
        let mut expect_bump = |now: u64, what: &str| {
            assert!(now > last, "{what}: revision {now} after {last}");
            last = now;
        };

        let mut data = catalog();
        db.store.replace_catalog(&data).await.expect("write");
        expect_bump(db.store.revision().await.expect("revision"), "catalog write");

        data.workspaces[0].apps[0].flows[0].name = "Renamed".to_owned();
        db.store.replace_catalog(&data).await.expect("write");
        expect_bump(db.store.revision().await.expect("revision"), "flow rename");

        let record = support::key_record(WS1, 'k', OffsetDateTime::now_utc());
        db.store.insert_key(record.clone()).await.expect("insert key");
        expect_bump(db.store.revision().await.expect("revision"), "key insert");

        db.store.revoke_key(record.id, OffsetDateTime::now_utc()).await.expect("revoke");
        expect_bump(db.store.revision().await.expect("revision"), "key revoke");

        // Revoking again changes no row, so nothing needs reloading.
        db.store.revoke_key(record.id, OffsetDateTime::now_utc()).await.expect("revoke again");
        assert_eq!(db.store.revision().await.expect("revision"), last);
    }
}
