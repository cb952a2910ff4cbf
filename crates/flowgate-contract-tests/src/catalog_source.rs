//! [`CatalogSource`] contract: catalog round trip, revisions, change detection, and the key
//! table a loaded catalog carries (D2, D12).

use std::time::Duration;

use flowgate_domain::catalog::CatalogData;
use flowgate_domain::keys::{AuthError, KeyEnvironment};
use flowgate_domain::ports::{CatalogSource, KeyStore};
use flowgate_domain::Catalog;

use crate::fixtures::{self, at, EXACT_SCHEMA, V_US_2, WS1, WS2};
use crate::Harness;

/// The whole catalog as JSON text with the revision zeroed, for exact comparison.
fn comparable(mut data: CatalogData) -> String {
    data.revision = 0;
    match serde_json::to_string_pretty(&data) {
        Ok(text) => text,
        Err(e) => panic!("catalog data serialises: {e}"),
    }
}

/// The flow_schema text of the version [`V_US_2`].
fn exact_schema_text(data: &CatalogData) -> Option<String> {
    data.workspaces
        .iter()
        .flat_map(|w| &w.apps)
        .flat_map(|a| &a.flows)
        .flat_map(|f| &f.versions)
        .find(|v| v.id.0 == V_US_2)
        .map(|v| v.flow_schema.get().to_owned())
}

async fn write_fixture_catalog<H: Harness>(h: &H) {
    if let Err(e) = h.write_catalog(&fixtures::catalog()).await {
        panic!("writing the fixture catalog: {e}");
    }
}

async fn revision<S: CatalogSource + ?Sized>(store: &S) -> u64 {
    match store.revision().await {
        Ok(revision) => revision,
        Err(e) => panic!("revision: {e}"),
    }
}

async fn load<S: CatalogSource + ?Sized>(store: &S) -> CatalogData {
    match store.load_catalog().await {
        Ok(data) => data,
        Err(e) => panic!("load_catalog: {e}"),
    }
}

/// Written catalog data loads back exactly: the same workspaces, apps, flows, versions,
/// placements, rules and variants in their order, the `flow_schema` byte for byte (D2), and
/// the domain builds a catalog from it.
pub async fn catalog_round_trip_is_exact<H: Harness>(h: &H) {
    write_fixture_catalog(h).await;
    let loaded = load(h.store()).await;

    assert_eq!(exact_schema_text(&loaded).as_deref(), Some(EXACT_SCHEMA));
    assert_eq!(comparable(loaded.clone()), comparable(fixtures::catalog()));
    let placement = &loaded.workspaces[0].apps[0].placements[2];
    assert_eq!(placement.key, "paywall");
    let variants: Vec<&str> = placement.rules[1]
        .experiment
        .iter()
        .flat_map(|e| &e.variants)
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(variants, ["new", "control"], "variants keep their order");

    let revision = loaded.revision;
    match Catalog::build(loaded) {
        Ok(catalog) => assert_eq!(catalog.revision(), revision),
        Err(e) => panic!("the loaded catalog does not build: {e:?}"),
    }
}

/// The members of catalog format 2 load back as written: an experiment's analysis settings
/// (D27) and schedule (D29), a variant's flow version (D29) and an app's App Store fields
/// (D30). Changing them alone is a new revision, and
/// removing them loads as none (the defaults).
pub async fn format_2_members_round_trip<H: Harness>(h: &H) {
    let mut with = fixtures::catalog_with_analysis();
    if let Some(e) = with.workspaces[0].apps[0].placements[2].rules[1]
        .experiment
        .as_mut()
    {
        e.starts_at = Some(time::macros::datetime!(2030-01-01 09:00 UTC));
        e.ends_at = Some(time::macros::datetime!(2030-02-01 09:00:00.5 UTC));
        e.variants[1].flow_version = Some(1);
    }
    if let Err(e) = h.write_catalog(&with).await {
        panic!("writing the catalog with the members of format 2: {e}");
    }
    let loaded = load(h.store()).await;
    assert_eq!(comparable(loaded.clone()), comparable(with));
    let apple = |data: &CatalogData| {
        let app = &data.workspaces[0].apps[0];
        (app.apple_bundle_id.clone(), app.apple_environments.clone())
    };
    assert_eq!(
        apple(&loaded),
        (
            Some("com.example.acme".to_owned()),
            vec!["Production".to_owned(), "Sandbox".to_owned()]
        )
    );
    let analysis = |data: &CatalogData| {
        data.workspaces[0].apps[0].placements[2].rules[1]
            .experiment
            .as_ref()
            .and_then(|e| e.analysis.clone())
    };
    let schedule = |data: &CatalogData| {
        let Some(e) = data.workspaces[0].apps[0].placements[2].rules[1]
            .experiment
            .clone()
        else {
            panic!("the running experiment is missing");
        };
        let pins: Vec<Option<u32>> = e.variants.iter().map(|v| v.flow_version).collect();
        (e.starts_at, e.ends_at, pins)
    };
    assert_eq!(
        schedule(&loaded),
        (
            Some(time::macros::datetime!(2030-01-01 09:00 UTC)),
            Some(time::macros::datetime!(2030-02-01 09:00:00.5 UTC)),
            vec![None, Some(1)]
        ),
        "to the microsecond"
    );
    let stored = analysis(&loaded);
    assert_eq!(
        stored
            .as_ref()
            .map(|a| (a.guardrail_metrics.clone(), a.minimum_users)),
        Some((
            vec!["revenue".to_owned(), "purchase_fail".to_owned()],
            Some(250)
        ))
    );
    // The environments alone changed: the app's row is updated in place, a new revision.
    let mut sandbox = fixtures::catalog_with_analysis();
    sandbox.workspaces[0].apps[0].apple_environments = vec!["Sandbox".to_owned()];
    let before = loaded.revision;
    if let Err(e) = h.write_catalog(&sandbox).await {
        panic!("writing the catalog with other environments: {e}");
    }
    let loaded = load(h.store()).await;
    assert!(loaded.revision > before, "a new revision");
    assert_eq!(comparable(loaded.clone()), comparable(sandbox));

    let before = loaded.revision;
    write_fixture_catalog(h).await;
    let loaded = load(h.store()).await;
    assert!(loaded.revision > before, "a new revision");
    assert_eq!(analysis(&loaded), None, "removed: the defaults");
    assert_eq!(apple(&loaded), (None, Vec::new()), "removed: none");
    assert_eq!(
        schedule(&loaded),
        (None, None, vec![None, None]),
        "removed: none"
    );
    assert_eq!(comparable(loaded), comparable(fixtures::catalog()));
}

/// The revision a load reports is the one [`CatalogSource::revision`] reports.
pub async fn loaded_revision_is_the_current_revision<H: Harness>(h: &H) {
    write_fixture_catalog(h).await;
    let loaded = load(h.store()).await;
    assert_eq!(loaded.revision, revision(h.store()).await);
}

/// A catalog write increases the revision.
pub async fn revision_increases_on_catalog_write<H: Harness>(h: &H) {
    let before = revision(h.store()).await;
    write_fixture_catalog(h).await;
    let after = revision(h.store()).await;
    assert!(after > before, "revision {after} after {before}");
}

/// Inserting a key increases the revision (the snapshot's key table changed).
pub async fn revision_increases_on_key_insert<H: Harness>(h: &H) {
    write_fixture_catalog(h).await;
    let before = revision(h.store()).await;
    let insert = h.store().insert_key(fixtures::key_record(WS1, 'a', at(0)));
    assert_eq!(insert.await, Ok(()));
    let after = revision(h.store()).await;
    assert!(after > before, "revision {after} after {before}");
}

/// Revoking a key increases the revision (the key leaves the snapshot's key table).
pub async fn revision_increases_on_key_revoke<H: Harness>(h: &H) {
    write_fixture_catalog(h).await;
    let record = fixtures::key_record(WS1, 'a', at(0));
    assert_eq!(h.store().insert_key(record.clone()).await, Ok(()));
    let before = revision(h.store()).await;
    let revoked = h.store().revoke_key(record.id, at(5)).await;
    assert!(revoked.is_ok(), "revoke: {revoked:?}");
    let after = revision(h.store()).await;
    assert!(after > before, "revision {after} after {before}");
}

/// `wait_for_change(known)` after a change returns the new revision, not `known`. Timing is
/// not part of the contract (an implementation that cannot wait may return at once); the
/// adapters' own tests measure how promptly they wake.
pub async fn wait_for_change_returns_the_new_revision<H: Harness>(h: &H) {
    write_fixture_catalog(h).await;
    let known = revision(h.store()).await;
    let insert = h.store().insert_key(fixtures::key_record(WS2, 'w', at(0)));
    assert_eq!(insert.await, Ok(()));
    let current = revision(h.store()).await;
    let seen = h
        .store()
        .wait_for_change(known, Duration::from_secs(10))
        .await;
    assert_eq!(seen, Ok(current));
    assert_ne!(current, known);
}

/// A loaded catalog's `api_keys` holds every key, revoked ones included, and the catalog built
/// from it refuses the revoked key while accepting the active one (D1).
pub async fn loaded_keys_include_revoked_and_build_refuses_them<H: Harness>(h: &H) {
    write_fixture_catalog(h).await;
    let active = fixtures::key_record(WS1, 'a', at(0));
    let mut revoked = fixtures::key_record(WS1, 'r', at(1));
    let elsewhere = fixtures::key_record(WS2, 'e', at(2));
    for record in [&active, &revoked, &elsewhere] {
        assert_eq!(h.store().insert_key(record.clone()).await, Ok(()));
    }
    let revoked_at = at(10);
    let stored = h.store().revoke_key(revoked.id, revoked_at).await;
    revoked.revoked_at = Some(revoked_at);
    assert_eq!(stored.as_ref(), Ok(&revoked));

    let mut loaded = load(h.store()).await;
    loaded.api_keys.sort_by_key(|k| (k.created_at, k.id));
    assert_eq!(
        loaded.api_keys,
        [active.clone(), revoked.clone(), elsewhere]
    );

    let catalog = match Catalog::build(loaded) {
        Ok(catalog) => catalog,
        Err(e) => panic!("the loaded catalog does not build: {e:?}"),
    };
    assert_eq!(catalog.key(&revoked.digest), None);
    assert_eq!(
        catalog.authenticate(Some(fixtures::api_key('r').expose()), KeyEnvironment::Test),
        Err(AuthError::InvalidApiKey)
    );
    assert_eq!(
        catalog.authenticate(Some(fixtures::api_key('a').expose()), KeyEnvironment::Test),
        Ok(&active)
    );
}
