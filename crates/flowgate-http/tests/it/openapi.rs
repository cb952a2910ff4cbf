//! The OpenAPI document: the committed `docs/openapi.json` is what the code generates, and what
//! the server serves. Regenerate with `make openapi` after changing the API.

use flowgate_http::openapi::{document, document_text};
use flowgate_http::problem::PROBLEM_CODES;

use crate::support::{server, Backend};

fn committed_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

#[test]
fn committed_document_matches_the_code() {
    let path = committed_path();
    if std::env::var("UPDATE_OPENAPI").is_ok_and(|v| v == "1") {
        std::fs::write(&path, document_text()).expect("write docs/openapi.json");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == document_text(),
        "docs/openapi.json differs from the document the code generates: run `make openapi` and commit it"
    );
}

#[test]
fn document_covers_every_route_and_code() {
    let doc = document();
    let paths = doc["paths"].as_object().unwrap();
    for route in [
        "/v1/apps/{appId}/placements/{placementId}/resolve",
        "/v1/apps/{appId}/placements/resolve-batch",
        "/v1/apps/{appId}/events",
        "/v1/placements/{placementId}/resolve",
        "/v1/events",
    ] {
        assert!(paths.contains_key(route), "{route}");
        assert!(
            paths[route]["post"]["responses"]["429"].is_object(),
            "{route} documents 429"
        );
    }
    let codes = doc["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]
        .as_array()
        .unwrap();
    assert_eq!(codes.len(), PROBLEM_CODES.len());
    let types = doc["components"]["schemas"]["EventInput"]["properties"]["event_type"]["enum"]
        .as_array()
        .unwrap();
    assert!(types.iter().any(|t| t == "flow_complete"));
    assert!(
        !types.iter().any(|t| t == "resolve_no_flow"),
        "server-only type is not offered to SDKs"
    );
    // Every $ref points at something that exists.
    let text = document_text();
    for piece in text.split("\"$ref\": \"#/").skip(1) {
        let target = &piece[..piece.find('"').unwrap()];
        let mut node = &doc;
        for segment in target.split('/') {
            node = &node[segment];
        }
        assert!(!node.is_null(), "dangling $ref #/{target}");
    }
}

/// What a client generated from the document sends is accepted: the legacy resolve's body names
/// its app (a workspace of several apps has no other way to choose), and no operation takes
/// `Content-Encoding` as a parameter of its own (the events bodies say how they may be
/// compressed; a plain body labelled gzip is refused).
#[test]
fn document_asks_only_for_what_the_server_accepts() {
    let doc = document();
    let required = doc["components"]["schemas"]["LegacyResolveRequest"]["required"]
        .as_array()
        .unwrap();
    assert!(required.iter().any(|r| r == "app_id"), "{required:?}");
    assert!(doc["components"].get("parameters").is_none());
    for (route, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for p in op["parameters"].as_array().into_iter().flatten() {
                assert_ne!(p["in"], "header", "{method} {route}: {p}");
            }
        }
    }
    for route in ["/v1/apps/{appId}/events", "/v1/events"] {
        let body = &doc["paths"][route]["post"]["requestBody"];
        let description = body["description"].as_str().unwrap_or_default();
        assert!(description.contains("Content-Encoding: gzip"), "{route}");
    }
}

#[actix_web::test]
async fn served_document_is_the_committed_one() {
    let s = server!(Backend::Sqlite);
    let r = s
        .request(awc::http::Method::GET, "/openapi.json", &[])
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(String::from_utf8(r.body).unwrap(), document_text());
}
