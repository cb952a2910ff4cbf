//! Catalog export (D19): the stored catalog written back as a catalog file (D13) that
//! `flowgate import` reads, so any earlier state can be restored by importing an exported file.
//!
//! The file holds no API keys: they are secrets, and the store keeps only their digests (D1).
//! Importing an export therefore changes no key. The output is deterministic: workspaces, apps
//! and flows are sorted by id, versions by number and placements by key (byte order), which is
//! also the order the store loads them in; rules and variants keep their order, which has a
//! meaning (D3, D5). Each `flow_schema` is written as its exact stored text (D2).

use super::data::{AppData, CatalogData};
use super::file::{CatalogFile, WorkspaceFile};
use crate::ids::WorkspaceId;

/// Why a catalog could not be exported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The workspace asked for is not in the catalog.
    #[error("no workspace {0} in the catalog")]
    UnknownWorkspace(WorkspaceId),
}

impl CatalogFile {
    /// The catalog file of `data` (D19): every workspace, or only `workspace`, with its apps,
    /// flows, versions and placements, and no API keys. Entities are sorted as described in
    /// the module documentation, so the same catalog always gives the same file.
    pub fn from_data(
        data: &CatalogData,
        workspace: Option<WorkspaceId>,
    ) -> Result<CatalogFile, ExportError> {
        let mut workspaces: Vec<WorkspaceFile> = data
            .workspaces
            .iter()
            .filter(|ws| workspace.is_none_or(|id| ws.id == id))
            .map(|ws| {
                let mut apps: Vec<AppData> = ws.apps.iter().map(sorted_app).collect();
                apps.sort_by_key(|a| a.id);
                WorkspaceFile {
                    id: ws.id,
                    name: ws.name.clone(),
                    api_keys: Vec::new(),
                    apps,
                }
            })
            .collect();
        if let (Some(id), true) = (workspace, workspaces.is_empty()) {
            return Err(ExportError::UnknownWorkspace(id));
        }
        workspaces.sort_by_key(|ws| ws.id);
        let mut file = CatalogFile {
            format: CatalogFile::FORMAT,
            workspaces,
        };
        file.format = file.lowest_format();
        Ok(file)
    }

    /// The file as JSON text, pretty-printed (two-space indents) and ending with a newline:
    /// what `flowgate catalog export` writes. Each `flow_schema` is written as its raw text.
    pub fn to_pretty_json(&self) -> Result<String, serde_json::Error> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        Ok(text)
    }
}

/// A copy of `app` with its flows by id, each flow's versions by number and its placements by
/// key. Rules, variants and fonts keep their order.
fn sorted_app(app: &AppData) -> AppData {
    let mut app = app.clone();
    app.flows.sort_by_key(|f| f.id);
    for flow in &mut app.flows {
        flow.versions.sort_by_key(|v| v.version);
    }
    app.placements.sort_by(|a, b| a.key.cmp(&b.key));
    app
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::catalog::plan_import;
    use crate::keys::{ApiKey, KeyEnvironment};

    const WS1: &str = "10000000-0000-4000-8000-000000000001";
    const WS2: &str = "10000000-0000-4000-8000-000000000002";
    const SCHEMA: &str = r#"{"z": 1, "a": [1.50, 1E3], "big": 123456789012345678901234567890}"#;

    /// A catalog file with entities out of order, a key, and a `flow_schema` a re-encoder
    /// would change.
    fn file_text() -> String {
        let key = ApiKey::from_random(KeyEnvironment::Test, &"k".repeat(30));
        let file = json!({"workspaces": [
            {"id": WS2, "name": "Second", "apps": []},
            {"id": WS1, "name": "First",
             "api_keys": [{"key": key.expose(), "type": "sdk", "name": "ios"}],
             "apps": [
              {"id": "20000000-0000-4000-8000-000000000002", "name": "B",
               "media_base_url": "https://m/", "icon_base_url": "https://i/"},
              {"id": "20000000-0000-4000-8000-000000000001", "name": "A",
               "media_base_url": "https://m/", "icon_base_url": "https://i/",
               "cache_ttl_seconds": 60, "saved_groups": {"beta": ["u1", 2]},
               "flows": [
                 {"id": "30000000-0000-4000-8000-000000000002", "name": "Draft",
                  "versions": [{"id": "40000000-0000-4000-8000-000000000003", "version": 1,
                                "schema_version": 1, "flow_schema": {}}]},
                 {"id": "30000000-0000-4000-8000-000000000001", "name": "Main",
                  "published_version": 1,
                  "versions": [
                    {"id": "40000000-0000-4000-8000-000000000002", "version": 2,
                     "schema_version": 1, "flow_schema": {}},
                    {"id": "40000000-0000-4000-8000-000000000001", "version": 1,
                     "schema_version": 2, "flow_schema": "SCHEMA",
                     "fonts": [{"family": "Inter", "weight": 700, "style": "italic", "url": "https://f/b"},
                               {"family": "Inter", "weight": 400, "style": "normal", "url": "https://f/a"}]}]}],
               "placements": [
                 {"key": "paywall", "rules": [
                   {"audience": {"country": "US"},
                    "flow_id": "30000000-0000-4000-8000-000000000001"},
                   {"experiment": {"id": "50000000-0000-4000-8000-000000000001", "name": "e",
                     "status": "running", "seed": "s", "coverage": 0.5,
                     "namespace": ["ns", 0.0, 0.5],
                     "variants": [
                       {"id": "60000000-0000-4000-8000-000000000002", "name": "new",
                        "weight": 2.5, "flow_id": "30000000-0000-4000-8000-000000000001"},
                       {"id": "60000000-0000-4000-8000-000000000001", "name": "control",
                        "weight": 1, "flow_id": null}]}}]},
                 {"key": "Onboarding", "default_flow_id": "30000000-0000-4000-8000-000000000001"}]}]}]});
        serde_json::to_string(&file)
            .expect("serialise")
            .replace("\"SCHEMA\"", SCHEMA)
    }

    /// The file as the store would hold it after importing it into an empty store.
    fn data() -> CatalogData {
        let file = CatalogFile::parse(&file_text()).expect("the fixture parses");
        let now = time::macros::datetime!(2026-11-26 00:00 UTC);
        plan_import(file, &CatalogData::default(), now)
            .expect("the fixture is valid")
            .write
    }

    fn exported(workspace: Option<WorkspaceId>) -> Value {
        let text = CatalogFile::from_data(&data(), workspace)
            .expect("exports")
            .to_pretty_json()
            .expect("serialises");
        serde_json::from_str(&text).expect("JSON")
    }

    fn ids(value: &Value, pointer: &str, field: &str) -> Vec<String> {
        value
            .pointer(pointer)
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{pointer}"))
            .iter()
            .map(|v| v[field].to_string().trim_matches('"').to_owned())
            .collect()
    }

    #[test]
    fn entities_are_sorted_and_ordered_lists_kept() {
        let file = exported(None);
        assert_eq!(ids(&file, "/workspaces", "id"), [WS1, WS2]);
        let app = "/workspaces/0/apps";
        assert_eq!(
            ids(&file, app, "name"),
            ["A", "B"],
            "apps by id, not by file order"
        );
        assert_eq!(
            ids(&file, &format!("{app}/0/flows"), "name"),
            ["Main", "Draft"]
        );
        assert_eq!(
            ids(&file, &format!("{app}/0/flows/0/versions"), "version"),
            ["1", "2"]
        );
        // Byte order: upper case first.
        assert_eq!(
            ids(&file, &format!("{app}/0/placements"), "key"),
            ["Onboarding", "paywall"]
        );
        let rules = format!("{app}/0/placements/1/rules");
        assert_eq!(
            file.pointer(&format!("{rules}/0/flow_id"))
                .and_then(Value::as_str),
            Some("30000000-0000-4000-8000-000000000001")
        );
        assert_eq!(
            ids(&file, &format!("{rules}/1/experiment/variants"), "name"),
            ["new", "control"]
        );
        assert_eq!(
            ids(
                &file,
                &format!("{app}/0/flows/0/versions/0/fonts"),
                "weight"
            ),
            ["700", "400"]
        );
    }

    #[test]
    fn keys_are_left_out_and_flow_schema_is_kept_exactly() {
        let data = data();
        assert_eq!(data.api_keys.len(), 1, "the fixture has a key");
        let text = CatalogFile::from_data(&data, None)
            .expect("exports")
            .to_pretty_json()
            .expect("serialises");
        assert!(!text.contains("api_keys"), "{text}");
        assert!(!text.contains("fg_test_"), "{text}");
        assert!(text.contains(SCHEMA), "{text}");
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn the_export_parses_as_a_file_and_imports_as_no_change() {
        let data = data();
        let text = CatalogFile::from_data(&data, None)
            .expect("exports")
            .to_pretty_json()
            .expect("serialises");
        let file = CatalogFile::parse(&text).expect("the export is a valid catalog file");
        let now = time::macros::datetime!(2026-11-27 00:00 UTC);
        let plan = plan_import(file, &data, now).expect("the export imports");
        assert!(!plan.changed, "importing an export changes nothing");
        assert_eq!(plan.summary.keys, 0);
        assert_eq!(plan.summary.placements, 2);
        // Exporting the same data again gives the same bytes.
        let again = CatalogFile::from_data(&data, None)
            .expect("exports")
            .to_pretty_json()
            .expect("serialises");
        assert_eq!(text, again);
    }

    #[test]
    fn one_workspace_or_an_unknown_one() {
        let file = exported(Some(WS2.parse().expect("uuid")));
        assert_eq!(ids(&file, "/workspaces", "id"), [WS2]);
        let unknown: WorkspaceId = "10000000-0000-4000-8000-0000000000ff"
            .parse()
            .expect("uuid");
        let err = CatalogFile::from_data(&data(), Some(unknown)).expect_err("unknown");
        assert_eq!(err, ExportError::UnknownWorkspace(unknown));
        assert_eq!(
            err.to_string(),
            "no workspace 10000000-0000-4000-8000-0000000000ff in the catalog"
        );
    }

    #[test]
    fn an_empty_catalog_exports_as_an_empty_file() {
        let text = CatalogFile::from_data(&CatalogData::default(), None)
            .expect("exports")
            .to_pretty_json()
            .expect("serialises");
        assert_eq!(text, "{\n  \"format\": 1,\n  \"workspaces\": []\n}\n");
        CatalogFile::parse(&text).expect("parses");
    }
}
