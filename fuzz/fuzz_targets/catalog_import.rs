//! Catalog import (D13): any text as a catalog file through `CatalogFile::parse` and
//! `plan_import` (against an empty store), and as stored `CatalogData` through
//! `Catalog::build`. Invariants: nothing panics; a plan the import accepts builds (the import
//! already ran `Catalog::build` on the merged view); every placement of a built catalog
//! resolves, normally and in export mode, without panicking (the snapshot never holds a
//! dangling reference).
#![no_main]

use flowgate_domain::catalog::{plan_import, CatalogData, CatalogFile};
use flowgate_domain::ids::AppId;
use flowgate_domain::{Catalog, Platform, ResolveMode, ResolveRequest};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

fn targets(data: &CatalogData) -> Vec<(AppId, Vec<String>)> {
    data.workspaces
        .iter()
        .flat_map(|ws| &ws.apps)
        .map(|app| {
            (
                app.id,
                app.placements.iter().map(|p| p.key.clone()).collect(),
            )
        })
        .collect()
}

fn resolve_everything(catalog: &Catalog, targets: &[(AppId, Vec<String>)]) {
    let attrs: Map<String, Value> = json!({"country": "US", "app.version": "2.4.0", "age": 30})
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (app_id, keys) in targets {
        let app = catalog
            .app(*app_id)
            .expect("a built catalog holds its apps");
        for (user, platform) in [("u1", Platform::Ios), ("beta-1", Platform::Web)] {
            let request = ResolveRequest::new(user, "s1", platform, &attrs);
            for key in keys.iter().map(String::as_str).chain(["no-such-placement"]) {
                let _ = app.resolve(key, &request, ResolveMode::Normal);
                let _ = app.resolve(key, &request, ResolveMode::Export);
            }
            let _ = app.resolve_batch(keys, &request);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(file) = CatalogFile::parse(text) {
        if let Ok(plan) = plan_import(file, &CatalogData::default(), flowgate_fuzz::now()) {
            let targets = targets(&plan.write);
            let catalog =
                Catalog::build(plan.write).expect("a catalog the import accepted must build");
            resolve_everything(&catalog, &targets);
        }
    }
    if let Ok(data) = serde_json::from_str::<CatalogData>(text) {
        let targets = targets(&data);
        if let Ok(catalog) = Catalog::build(data) {
            resolve_everything(&catalog, &targets);
        }
    }
});
