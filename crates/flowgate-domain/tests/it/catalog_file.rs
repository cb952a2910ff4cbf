//! The catalog file's versions (D13, D26; the Versions section of `catalog/file.rs`): the golden
//! sample of every version, under the repository's `formats/flowgate.catalog/v<N>/`, is read
//! by today's import, and the export writes the current version's sample byte for byte.

use std::path::PathBuf;

use flowgate_contract_tests::fixtures::{assert_golden, catalog};
use flowgate_domain::catalog::{plan_import, CatalogFile};

/// `formats/flowgate.catalog/v<version>/<name>`.
fn sample(version: u32, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../formats/flowgate.catalog")
        .join(format!("v{version}"))
        .join(name)
}

/// The export of the contract suite's catalog, as `flowgate catalog export` writes it.
fn export() -> String {
    CatalogFile::from_data(&catalog(), None)
        .expect("exports")
        .to_pretty_json()
        .expect("serialises")
}

#[test]
fn the_export_is_the_current_formats_sample() {
    let path = sample(CatalogFile::FORMAT, "catalog.json");
    assert_golden(&path, export().as_bytes(), "flowgate.catalog");
}

/// Each sample of each version, the current one included, parses with today's reader, says
/// its format (1 when it has no `format` member) and imports onto the catalog it was
/// exported from as no change.
#[test]
fn every_versions_samples_import_as_the_catalog_they_hold() {
    let samples: [(u32, &str); 2] = [
        (1, "catalog.json"),
        // As exports were written before the optional `format` member: absent reads as 1.
        (1, "catalog-without-format.json"),
    ];
    for (version, name) in samples {
        let path = sample(version, name);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file =
            CatalogFile::parse(&text).unwrap_or_else(|p| panic!("{}: {p:?}", path.display()));
        assert_eq!(file.format, version, "{}", path.display());
        let now = time::macros::datetime!(2026-11-28 00:00 UTC);
        let plan = plan_import(file, &catalog(), now)
            .unwrap_or_else(|p| panic!("{}: {p:?}", path.display()));
        assert!(!plan.changed, "{}: imports as no change", path.display());
    }
    let without = std::fs::read_to_string(sample(1, "catalog-without-format.json")).unwrap();
    assert!(!without.contains("\"format\""));
}

/// An export of a format newer than this release reads is refused whole, naming both.
#[test]
fn an_export_of_a_newer_format_is_refused() {
    let newer = CatalogFile::FORMAT + 1;
    let text = export().replacen(
        &format!("\"format\": {}", CatalogFile::FORMAT),
        &format!("\"format\": {newer}"),
        1,
    );
    let problems = CatalogFile::parse(&text).expect_err("newer");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].pointer, "/format");
    assert!(
        problems[0].message.contains(&format!(
            "format {newer}, newer than this release reads (format 1)"
        )),
        "{problems:?}"
    );
}
