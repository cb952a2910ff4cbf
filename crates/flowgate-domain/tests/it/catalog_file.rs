//! The catalog file's versions (D13, D26; the Versions section of `catalog/file.rs`): the golden
//! sample of every version, under the repository's `formats/flowgate.catalog/v<N>/`, is read
//! by today's import, and the export writes the current version's sample byte for byte.

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

/// Each export is written as the lowest format whose members it uses: the catalog without
/// analysis settings as format 1 (which 0.2.0 imports), the one with them as format 2.
#[test]
fn the_exports_are_their_formats_samples() {
    assert_golden(
        &sample(1, "catalog.json"),
        export().as_bytes(),
        "flowgate.catalog",
    );
    assert_golden(
        &sample(2, "catalog.json"),
        export_of(&analysed()).as_bytes(),
        "flowgate.catalog",
    );
    assert_eq!(CatalogFile::FORMAT, 2, "the newest has a sample above");
}

/// Each sample of each version, the current one included, parses with today's reader, says
/// its format (1 when it has no `format` member) and imports onto the catalog it was
/// exported from as no change.
#[test]
fn every_versions_samples_import_as_the_catalog_they_hold() {
    let samples: [(u32, &str, CatalogData); 3] = [
        (1, "catalog.json", catalog()),
        // As exports were written before the optional `format` member: absent reads as 1.
        (1, "catalog-without-format.json", catalog()),
        (2, "catalog.json", analysed()),
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
