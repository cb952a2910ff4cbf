//! The stored form of the console's catalog changes (D26, D28; the "Stored form" section of
//! `catalog/changes.rs`): the golden samples of every version, under the repository's
//! `formats/flowgate.catalog-change/v<N>/`, one per kind, are read by today's reader as the
//! change they hold; the writer writes the current version's samples byte for byte; and each
//! applies to the fixture catalog as a file the import takes.

use std::path::PathBuf;

use flowgate_contract_tests::fixtures::{assert_golden, formats_dir};
use flowgate_domain::catalog::{plan_dry_run, plan_import, CatalogChange, ExperimentStatus};
use serde_json::Value;

use crate::fixtures::*;

const FORMAT: &str = "flowgate.catalog-change";

fn sample(version: u32, name: &str) -> PathBuf {
    formats_dir()
        .join(FORMAT)
        .join(format!("v{version}"))
        .join(name)
}

fn id<T: std::str::FromStr>(text: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    text.parse().unwrap()
}

/// Each sample of format 1 and the change it holds: one per kind.
fn format_1() -> Vec<(&'static str, CatalogChange)> {
    vec![
        (
            "set-experiment-status.json",
            CatalogChange::SetExperimentStatus {
                experiment: id(EXP),
                status: ExperimentStatus::Paused,
            },
        ),
        (
            "set-allocation.json",
            CatalogChange::SetAllocation {
                experiment: id(EXP),
                weights: vec![(id(VAR_CONTROL), 0.7), (id(VAR_NEW), 0.3)],
                coverage: Some(0.5),
            },
        ),
        (
            "ship-variant.json",
            CatalogChange::ShipVariant {
                experiment: id(EXP),
                variant: id(VAR_NEW),
            },
        ),
        (
            "publish-flow-version.json",
            CatalogChange::PublishFlowVersion {
                flow: id(FLOW_US),
                version: 1,
            },
        ),
        (
            "set-rule-enabled.json",
            CatalogChange::SetRuleEnabled {
                app: id(APP1),
                placement: "onboarding".to_owned(),
                rule: 1,
                enabled: false,
            },
        ),
        (
            "start-rollout.json",
            CatalogChange::StartRollout {
                app: id(APP1),
                placement: "onboarding".to_owned(),
                rule: 0,
                experiment: id("50000000-0000-4000-8000-000000000071"),
                name: "Rollout of New".to_owned(),
                control: id("60000000-0000-4000-8000-000000000071"),
                treatment: id("60000000-0000-4000-8000-000000000072"),
                flow: id(FLOW_NEW),
                version: None,
                share: 1.0,
                guardrails: vec![
                    "flow_complete".to_owned(),
                    "purchase_complete".to_owned(),
                    "revenue".to_owned(),
                ],
                minimum_users: 100,
                plan: None,
            },
        ),
        (
            // The optional `version` (D29): not a new format (D26).
            "start-rollout-version.json",
            CatalogChange::StartRollout {
                app: id(APP1),
                placement: "onboarding".to_owned(),
                rule: 0,
                experiment: id("50000000-0000-4000-8000-000000000073"),
                name: "Rollout of US onboarding version 1".to_owned(),
                control: id("60000000-0000-4000-8000-000000000073"),
                treatment: id("60000000-0000-4000-8000-000000000074"),
                flow: id(FLOW_US),
                version: Some(1),
                share: 5.0,
                guardrails: vec!["purchase_complete".to_owned()],
                minimum_users: 50,
                plan: None,
            },
        ),
        (
            // The optional `plan` of a start proposed for review (D35): not a new format.
            "start-rollout-plan.json",
            CatalogChange::StartRollout {
                app: id(APP1),
                placement: "onboarding".to_owned(),
                rule: 0,
                experiment: id("50000000-0000-4000-8000-000000000075"),
                name: "Rollout of New".to_owned(),
                control: id("60000000-0000-4000-8000-000000000075"),
                treatment: id("60000000-0000-4000-8000-000000000076"),
                flow: id(FLOW_NEW),
                version: None,
                share: 10.0,
                guardrails: vec!["flow_complete".to_owned(), "revenue".to_owned()],
                minimum_users: 200,
                plan: Some(Box::new(
                    flowgate_domain::rollouts::RolloutPlan::new(
                        vec![10.0, 50.0, 100.0],
                        3600,
                        200,
                        vec!["flow_complete".to_owned(), "revenue".to_owned()],
                    )
                    .and_then(|p| p.with_optional(vec!["revenue".to_owned()]))
                    .unwrap(),
                )),
            },
        ),
        (
            // A catalog file proposed for review (D35): the second workspace, renamed.
            "import-file.json",
            CatalogChange::ImportFile {
                name: "catalog.json".to_owned(),
                sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
                    .to_owned(),
                catalog: Box::new(second_workspace_renamed()),
            },
        ),
    ]
}

/// The fixture catalog's second workspace alone, renamed: a file whose import changes one name.
fn second_workspace_renamed() -> Value {
    let mut file = catalog_json();
    let mut second = file["workspaces"][1].take();
    second["name"] = "Globex renamed".into();
    serde_json::json!({ "workspaces": [second] })
}

/// The stored JSON as the console keeps it: pretty, ending with a newline.
fn written(change: &CatalogChange) -> String {
    let mut text = serde_json::to_string_pretty(&change.to_json()).unwrap();
    text.push('\n');
    text
}

#[test]
fn each_kind_is_written_as_its_sample() {
    assert_eq!(CatalogChange::FORMAT, 1, "the newest has its samples below");
    for (name, change) in format_1() {
        assert_golden(&sample(1, name), written(&change).as_bytes(), FORMAT);
    }
}

/// Every sample of every version read, the current one included, reads as its change, and
/// no sample goes unread.
#[test]
fn every_versions_samples_read_as_their_change() {
    let versions: [(u32, Vec<(&str, CatalogChange)>); 1] = [(1, format_1())];
    assert_eq!(versions.len() as u32, CatalogChange::FORMAT);
    for (version, samples) in versions {
        let folder = formats_dir().join(FORMAT).join(format!("v{version}"));
        let mut on_disk: Vec<String> = std::fs::read_dir(&folder)
            .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = samples.iter().map(|(n, _)| (*n).to_owned()).collect();
        listed.sort();
        assert_eq!(on_disk, listed, "every sample of v{version} is read here");
        for (name, change) in samples {
            let path = sample(version, name);
            let text = std::fs::read_to_string(&path).unwrap();
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(value["format"], Value::from(version), "{name}");
            assert_eq!(
                CatalogChange::from_json(&value).unwrap_or_else(|e| panic!("{name}: {e}")),
                change,
                "{name}"
            );
        }
    }
}

/// Each sample's change applies to the fixture catalog: the import takes the file, and the
/// dry run shows a change.
#[test]
fn each_sample_applies_to_the_fixture_catalog() {
    let stored = data_from(&catalog_json());
    let now = time::macros::datetime!(2026-12-05 00:00 UTC);
    let mut described = Vec::new();
    for (name, change) in format_1() {
        let file = change
            .apply(&stored)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let plan =
            plan_import(file.clone(), &stored, now).unwrap_or_else(|p| panic!("{name}: {p:?}"));
        assert!(plan.changed, "{name}");
        let dry = plan_dry_run(file, &stored, now).unwrap();
        assert!(!dry.diff.is_empty(), "{name}");
        described.push(change.describe(&stored));
    }
    assert_eq!(
        described,
        [
            "pause `paywall-test` (paywall, Acme iOS)",
            "set the weights of `paywall-test` to control 70%, new 30% and its coverage to 50% \
             (paywall, Acme iOS)",
            "ship `new` of `paywall-test` (paywall, Acme iOS)",
            "return `US onboarding` to version 1 (Acme iOS)",
            "turn off rule 1 of placement `onboarding` (Acme iOS)",
            "start rolling out `New` on placement `onboarding` at 1% (Acme iOS)",
            "start rolling out version 1 of `US onboarding` on placement `onboarding` at 5% (Acme iOS)",
            "start rolling out `New` on placement `onboarding` at 10% (Acme iOS)",
            "import `catalog.json` (1 workspace(s), sha256 9f86d081884c)",
        ]
    );
}
