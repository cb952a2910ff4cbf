//! The catalog file's versions (D13, D26; the Versions section of `catalog/file.rs`): the golden
//! sample of every version, under the repository's `formats/flowgate.catalog/v<N>/`, is read
//! by today's import, and the export writes the current version's newest sample byte for byte.
//!
//! Format 2's samples: `v2/catalog.json`, written when the format held only an experiment's
//! `analysis` (D27), `v2/catalog-stores.json`, with an app's `apple_bundle_id` and
//! `apple_environments` (D30) too, and `v2/catalog-rule-off.json`, whose one member of format 2
//! is a rule's `enabled` (D28), and `v2/catalog-schedules.json`, whose members of format 2 are
//! an experiment's `starts_at` and `ends_at` and a variant's `flow_version` (D29).

use std::path::PathBuf;

use flowgate_contract_tests::fixtures::{
    assert_golden, catalog, catalog_with_analysis as analysed,
};
use flowgate_domain::catalog::{plan_import, CatalogData, CatalogFile};

/// `formats/flowgate.catalog/v<version>/<name>`.
fn sample(version: u32, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../formats/flowgate.catalog")
        .join(format!("v{version}"))
        .join(name)
}

/// The export of `data`, as `flowgate catalog export` writes it.
fn export_of(data: &CatalogData) -> String {
    CatalogFile::from_data(data, None)
        .expect("exports")
        .to_pretty_json()
        .expect("serialises")
}

/// The export of the contract suite's catalog.
fn export() -> String {
    export_of(&catalog())
}

/// [`analysed`] without the App Store fields (D30): what `v2/catalog.json` holds, written before
/// format 2 had them.
fn analysed_before_store_fields() -> CatalogData {
    let mut data = analysed();
    for app in data.workspaces.iter_mut().flat_map(|w| &mut w.apps) {
        app.apple_bundle_id = None;
        app.apple_environments.clear();
    }
    data
}

/// The contract suite's catalog with the first rule of `onboarding` off (D28): its only member
/// of format 2.
fn rule_off() -> CatalogData {
    let mut data = catalog();
    let onboarding = data
        .workspaces
        .iter_mut()
        .flat_map(|w| &mut w.apps)
        .flat_map(|a| &mut a.placements)
        .find(|p| p.key == "onboarding")
        .expect("the fixture has an onboarding placement");
    onboarding.rules[0].enabled = false;
    data
}

/// The fixture with the paywall experiment scheduled and its variant showing version 1 of its
/// flow, whichever the flow publishes (D29).
fn scheduled() -> CatalogData {
    let mut data = catalog();
    let paywall = data
        .workspaces
        .iter_mut()
        .flat_map(|w| &mut w.apps)
        .flat_map(|a| &mut a.placements)
        .find(|p| p.key == "paywall")
        .expect("the fixture has a paywall placement");
    let experiment = paywall.rules[1]
        .experiment
        .as_mut()
        .expect("paywall's second rule runs an experiment");
    experiment.starts_at = Some(time::macros::datetime!(2026-12-01 09:00 UTC));
    experiment.ends_at = Some(time::macros::datetime!(2026-12-15 09:00 UTC));
    experiment
        .variants
        .iter_mut()
        .find(|v| v.flow_id.is_some())
        .expect("a variant showing a flow")
        .flow_version = Some(1);
    data
}

/// Each export is written as the lowest format whose members it uses: the catalog without
/// members of format 2 as format 1 (which 0.2.0 imports), the one with them as format 2, and
/// one with analysis settings but no App Store fields exactly as before those existed.
#[test]
fn the_exports_are_their_formats_samples() {
    assert_golden(
        &sample(1, "catalog.json"),
        export().as_bytes(),
        "flowgate.catalog",
    );
    assert_golden(
        &sample(2, "catalog-stores.json"),
        export_of(&analysed()).as_bytes(),
        "flowgate.catalog",
    );
    assert_golden(
        &sample(2, "catalog.json"),
        export_of(&analysed_before_store_fields()).as_bytes(),
        "flowgate.catalog",
    );
    assert_golden(
        &sample(2, "catalog-rule-off.json"),
        export_of(&rule_off()).as_bytes(),
        "flowgate.catalog",
    );
    assert_golden(
        &sample(2, "catalog-schedules.json"),
        export_of(&scheduled()).as_bytes(),
        "flowgate.catalog",
    );
    assert_eq!(CatalogFile::FORMAT, 2, "the newest has a sample above");
}

/// Each sample of each version, the current one included, parses with today's reader, says
/// its format (1 when it has no `format` member) and imports onto the catalog it was
/// exported from as no change.
#[test]
fn every_versions_samples_import_as_the_catalog_they_hold() {
    let samples: [(u32, &str, CatalogData); 6] = [
        (1, "catalog.json", catalog()),
        // As exports were written before the optional `format` member: absent reads as 1.
        (1, "catalog-without-format.json", catalog()),
        // Written before the App Store fields were members of format 2.
        (2, "catalog.json", analysed_before_store_fields()),
        (2, "catalog-stores.json", analysed()),
        (2, "catalog-rule-off.json", rule_off()),
        (2, "catalog-schedules.json", scheduled()),
    ];
    for (version, name, data) in samples {
        let path = sample(version, name);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file =
            CatalogFile::parse(&text).unwrap_or_else(|p| panic!("{}: {p:?}", path.display()));
        assert_eq!(file.format, version, "{}", path.display());
        let now = time::macros::datetime!(2026-11-28 00:00 UTC);
        let plan =
            plan_import(file, &data, now).unwrap_or_else(|p| panic!("{}: {p:?}", path.display()));
        assert!(!plan.changed, "{}: imports as no change", path.display());
    }
    let without = std::fs::read_to_string(sample(1, "catalog-without-format.json")).unwrap();
    assert!(!without.contains("\"format\""));
    // The App Store fields are the app's own: the older sample, which has none, imported onto
    // the catalog that has them removes them, a change.
    let older = std::fs::read_to_string(sample(2, "catalog.json")).unwrap();
    let now = time::macros::datetime!(2026-11-28 00:00 UTC);
    let plan = plan_import(CatalogFile::parse(&older).unwrap(), &analysed(), now).unwrap();
    assert!(plan.changed, "the App Store fields removed");
}

/// An export of a format newer than this release reads is refused whole, naming both.
#[test]
fn an_export_of_a_newer_format_is_refused() {
    let newer = CatalogFile::FORMAT + 1;
    let text = export_of(&analysed()).replacen(
        &format!("\"format\": {}", CatalogFile::FORMAT),
        &format!("\"format\": {newer}"),
        1,
    );
    let problems = CatalogFile::parse(&text).expect_err("newer");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].pointer, "/format");
    assert!(
        problems[0].message.contains(&format!(
            "format {newer}, newer than this release reads (format 2)"
        )),
        "{problems:?}"
    );
}

/// D28: the sample with a rule that is off is refused by a format-1 reading, at that member,
/// naming format 2; imported onto the catalog with the rule on, it turns it off.
#[test]
fn a_rule_that_is_off_needs_format_2() {
    let text = std::fs::read_to_string(sample(2, "catalog-rule-off.json")).unwrap();
    assert_eq!(
        text.matches("\"enabled\"").count(),
        1,
        "written only when false"
    );
    let as_format_1 = text.replacen("\"format\": 2", "\"format\": 1", 1);
    let problems = CatalogFile::parse(&as_format_1).expect_err("format 1 has no enabled");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].pointer.ends_with("/rules/0/enabled"),
        "{problems:?}"
    );
    assert!(
        problems[0]
            .message
            .starts_with("`enabled` is a member of catalog format 2"),
        "{problems:?}"
    );
    let file = CatalogFile::parse(&text).unwrap();
    let now = time::macros::datetime!(2026-12-05 00:00 UTC);
    let plan = plan_import(file, &catalog(), now).unwrap();
    assert!(plan.changed, "the rule turned off");
    let onboarding = plan
        .write
        .workspaces
        .iter()
        .flat_map(|w| &w.apps)
        .flat_map(|a| &a.placements)
        .find(|p| p.key == "onboarding")
        .unwrap();
    let enabled: Vec<bool> = onboarding.rules.iter().map(|r| r.enabled).collect();
    assert_eq!(enabled, [false, true, true]);
}

#[test]
fn experiments_lists_every_experiment_of_every_workspace_in_order() {
    let mut data = catalog();
    assert_eq!(
        data.workspaces.len(),
        2,
        "the fixture's second workspace has no app"
    );
    let mut copy = data.workspaces[0].apps[0].clone();
    for e in copy
        .placements
        .iter_mut()
        .flat_map(|p| &mut p.rules)
        .filter_map(|r| r.experiment.as_mut())
    {
        e.name = format!("{} (other workspace)", e.name);
    }
    data.workspaces[1].apps.push(copy);
    let names: Vec<&str> = data.experiments().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "old-test",
            "paywall-test",
            "old-test (other workspace)",
            "paywall-test (other workspace)"
        ]
    );
    assert_eq!(CatalogData::default().experiments().count(), 0);
}
