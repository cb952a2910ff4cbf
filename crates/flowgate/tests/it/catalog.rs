//! `flowgate catalog history|export` (D19) through the real binary on a SQLite file: an import
//! is in the history with the file's SHA-256, the export leaves keys out, and importing the
//! export writes nothing.

use std::path::Path;

use flowgate_domain::keys::{ApiKey, KeyEnvironment};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::fixtures;
use crate::support::run;

/// Runs `flowgate` against the SQLite file in `dir`; exit code, stdout, stderr.
fn flowgate(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let url = format!("sqlite://{}/flowgate.db", dir.display());
    run(args, &[("FLOWGATE__DATABASE__URL", &url)])
}

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn an_import_is_in_the_history_and_its_export_imports_as_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // The fixture catalog with a key, which the export must leave out.
    let mut catalog = fixtures::catalog_json();
    let key = ApiKey::from_random(KeyEnvironment::Test, &"h".repeat(30));
    catalog["workspaces"][0]["api_keys"] = json!([{"key": key.expose(), "name": "ios"}]);
    let content = serde_json::to_string_pretty(&catalog).unwrap();
    let file = dir.join("catalog.json");
    std::fs::write(&file, &content).unwrap();
    let sha256 = format!("{:x}", Sha256::digest(content.as_bytes()));

    let (code, out, err) = flowgate(dir, &["import", file.to_str().unwrap(), "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let report = json_of(&out);
    assert_eq!(report["changed"], json!(true));
    assert_eq!(report["sha256"], json!(sha256));

    let (code, out, err) = flowgate(dir, &["catalog", "history", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let history = json_of(&out);
    assert_eq!(history.as_array().map(Vec::len), Some(1), "{history}");
    let record = &history[0];
    assert_eq!(record["revision"], report["revision"]);
    assert_eq!(record["sha256"], json!(sha256));
    assert_eq!(record["file"], json!(file.display().to_string()));
    assert_eq!(
        record["summary"],
        json!({"workspaces": 2, "apps": 2, "flows": 5, "versions": 6, "placements": 6, "keys": 1})
    );
    assert!(
        time::OffsetDateTime::parse(
            record["imported_at"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339
        )
        .is_ok(),
        "{record}"
    );
    // The table shows the hash's first 12 digits and the file.
    let (code, out, err) = flowgate(dir, &["catalog", "history"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(&sha256[..12]) && !out.contains(&sha256),
        "{out}"
    );
    assert!(out.contains(&file.display().to_string()), "{out}");

    // The export, to a file (its folder is created) and to stdout: the same bytes, no keys.
    let exported = dir.join("exports/catalog-export.json");
    let (code, out, err) = flowgate(
        dir,
        &["catalog", "export", "--output", exported.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("no API keys"), "{out}");
    let (code, on_stdout, err) = flowgate(dir, &["catalog", "export"]);
    assert_eq!(code, Some(0), "{err}");
    let written = std::fs::read_to_string(&exported).unwrap();
    assert_eq!(written, on_stdout);
    assert!(
        !written.contains("api_keys") && !written.contains(key.expose()),
        "{written}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.join("exports")).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind");

    // Importing the export writes nothing: same revision, nothing recorded.
    let (code, out, err) = flowgate(dir, &["import", exported.to_str().unwrap(), "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let again = json_of(&out);
    assert_eq!(again["changed"], json!(false), "{again}");
    assert_eq!(again["revision"], report["revision"]);
    assert_eq!(again["keys"], json!(0));
    let (_, out, _) = flowgate(dir, &["catalog", "history", "--json"]);
    assert_eq!(json_of(&out), history);

    // One workspace, or an unknown one (exit code 5, the id quoted).
    let (code, out, err) = flowgate(dir, &["catalog", "export", "--workspace", fixtures::WS2]);
    assert_eq!(code, Some(0), "{err}");
    let only = json_of(&out);
    assert_eq!(only["workspaces"].as_array().map(Vec::len), Some(1));
    assert_eq!(only["workspaces"][0]["id"], json!(fixtures::WS2));
    let unknown = "10000000-0000-4000-8000-0000000000ff";
    let (code, out, err) = flowgate(dir, &["catalog", "export", "--workspace", unknown]);
    assert_eq!(code, Some(5), "{err}");
    assert!(out.is_empty() && err.contains(unknown), "{err}");
}

#[test]
fn an_empty_store_has_no_history() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = flowgate(dir.path(), &["catalog", "history", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(json_of(&out), json!([]));
    let (code, out, err) = flowgate(dir.path(), &["catalog", "history"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "no catalog imports recorded");
}
