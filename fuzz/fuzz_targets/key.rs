//! Key parsing (D1): any bytes as an `Authorization` header value through the HTTP adapter's
//! `bearer_token`, `ApiKey::parse` and `Catalog::authenticate` (the request path's whole key
//! handling).
//! Invariants: nothing panics; a parsed key round-trips, its digest is the SHA-256 of its
//! text, its display prefix is a prefix of it, and `Debug` never shows the plaintext; only the
//! fixture key authenticates.
#![no_main]

use std::sync::OnceLock;

use flowgate_domain::keys::{ApiKey, KeyDigest, KeyEnvironment};
use flowgate_http::authorization::bearer_token;
use flowgate_domain::Catalog;
use libfuzzer_sys::fuzz_target;

fn fixture() -> &'static (Catalog, String) {
    static FIXTURE: OnceLock<(Catalog, String)> = OnceLock::new();
    FIXTURE.get_or_init(|| (flowgate_fuzz::catalog(), flowgate_fuzz::sdk_key()))
}

fn check_key(text: &str) {
    let Ok(key) = ApiKey::parse(text) else {
        return;
    };
    assert_eq!(key.expose(), text);
    assert_eq!(key.digest(), KeyDigest::of(text));
    assert!(text.starts_with(key.display_prefix()));
    assert!(key.display_prefix().len() < text.len());
    assert!(
        !format!("{key:?}").contains(text),
        "Debug shows the plaintext"
    );
    let again = ApiKey::parse(key.expose()).expect("a parsed key parses again");
    assert_eq!(again, key);
}

fuzz_target!(|data: &[u8]| {
    let Ok(header) = std::str::from_utf8(data) else {
        return;
    };
    check_key(header);
    if let Some(token) = bearer_token(header) {
        assert!(!token.is_empty() && header.contains(token));
        check_key(token);
    }
    let (catalog, fixture_key) = fixture();
    for env in [KeyEnvironment::Test, KeyEnvironment::Live] {
        if let Ok(record) = catalog.authenticate(bearer_token(header), env) {
            assert_eq!(bearer_token(header), Some(fixture_key.as_str()));
            assert_eq!(record.digest, KeyDigest::of(fixture_key));
        }
    }
});
