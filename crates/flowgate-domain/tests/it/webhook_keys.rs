//! Webhook keys (D30): valid on the store routes of their workspace's apps only, as SDK keys
//! are on the SDK routes only; refused with D1's and D9's errors otherwise.

use flowgate_domain::catalog::{AppAccessError, WebhookAuthError};
use flowgate_domain::ids::AppId;
use flowgate_domain::keys::{AuthError, KeyEnvironment, KeyType};
use flowgate_domain::Catalog;
use time::macros::datetime;

use crate::fixtures::*;

/// The fixture catalog with a key of each kind: an SDK key, webhook keys of both workspaces
/// (one live), a revoked webhook key and a secret key.
struct Keys {
    catalog: Catalog,
}

const SDK: char = 'a';
const WEBHOOK: char = 'w';
const WEBHOOK_LIVE: char = 'l';
const WEBHOOK_REVOKED: char = 'r';
const WEBHOOK_WS2: char = 'o';
const SECRET: char = 's';

fn keys() -> Keys {
    let mut data = data_from(&catalog_json());
    let test = |fill| key(KeyEnvironment::Test, fill);
    data.api_keys.push(record(WS1, &test(SDK), KeyType::Sdk, 1));
    data.api_keys
        .push(record(WS1, &test(WEBHOOK), KeyType::Webhook, 2));
    data.api_keys.push(record(
        WS1,
        &key(KeyEnvironment::Live, WEBHOOK_LIVE),
        KeyType::Webhook,
        3,
    ));
    let mut revoked = record(WS1, &test(WEBHOOK_REVOKED), KeyType::Webhook, 4);
    revoked.revoked_at = Some(datetime!(2026-02-01 00:00 UTC));
    data.api_keys.push(revoked);
    data.api_keys
        .push(record(WS2, &test(WEBHOOK_WS2), KeyType::Webhook, 5));
    data.api_keys
        .push(record(WS1, &test(SECRET), KeyType::Secret, 6));
    Keys {
        catalog: Catalog::build(data).unwrap(),
    }
}

fn text(env: KeyEnvironment, fill: char) -> String {
    key(env, fill).expose().to_owned()
}

fn app(id: &str) -> AppId {
    id.parse().unwrap()
}

impl Keys {
    /// What the store routes answer for `token` on `app`: the key record's number, or why not.
    fn store_route(&self, token: Option<&str>, app_id: &str) -> Result<u128, WebhookAuthError> {
        self.catalog
            .authenticate_webhook(token, KeyEnvironment::Test, app(app_id))
            .map(|(record, found)| {
                assert_eq!(found.id(), app(app_id));
                record.id.0.as_u128()
            })
    }
}

#[test]
fn the_sdk_routes_refuse_a_webhook_key_as_a_key_of_another_type() {
    let keys = keys();
    let sdk = |fill| {
        keys.catalog
            .authenticate(
                Some(&text(KeyEnvironment::Test, fill)),
                KeyEnvironment::Test,
            )
            .map(|r| r.key_type)
    };
    assert_eq!(sdk(SDK), Ok(KeyType::Sdk));
    assert_eq!(sdk(WEBHOOK), Err(AuthError::KeyTypeNotAllowed));
    assert_eq!(sdk(WEBHOOK_WS2), Err(AuthError::KeyTypeNotAllowed));
    // The same refusal as for the type refused before webhook keys existed.
    assert_eq!(sdk(SECRET), Err(AuthError::KeyTypeNotAllowed));
    // A revoked webhook key is unknown, on any route.
    assert_eq!(sdk(WEBHOOK_REVOKED), Err(AuthError::InvalidApiKey));
}

#[test]
fn the_store_routes_take_a_webhook_key_of_the_apps_workspace_only() {
    let keys = keys();
    let test = |fill| text(KeyEnvironment::Test, fill);
    assert_eq!(keys.store_route(Some(&test(WEBHOOK)), APP1), Ok(2));
    assert_eq!(keys.store_route(Some(&test(WEBHOOK_WS2)), APP2), Ok(5));

    let key_error = |e: AuthError| Err(WebhookAuthError::Key(e));
    assert_eq!(
        keys.store_route(None, APP1),
        key_error(AuthError::MissingApiKey)
    );
    assert_eq!(
        keys.store_route(Some("fg_test_garbage"), APP1),
        key_error(AuthError::InvalidApiKey)
    );
    assert_eq!(
        keys.store_route(Some(&test('z')), APP1),
        key_error(AuthError::InvalidApiKey),
        "unknown"
    );
    assert_eq!(
        keys.store_route(Some(&test(WEBHOOK_REVOKED)), APP1),
        key_error(AuthError::InvalidApiKey),
        "revoked is like unknown"
    );
    assert_eq!(
        keys.store_route(Some(&test(SDK)), APP1),
        key_error(AuthError::KeyTypeNotAllowed),
        "an SDK key is not for the store routes"
    );
    assert_eq!(
        keys.store_route(Some(&test(SECRET)), APP1),
        key_error(AuthError::KeyTypeNotAllowed)
    );
    assert_eq!(
        keys.store_route(Some(&text(KeyEnvironment::Live, WEBHOOK_LIVE)), APP1),
        key_error(AuthError::KeyEnvironmentMismatch)
    );
    // The key first, then the app (D9): another workspace's app, an app that does not exist.
    assert_eq!(
        keys.store_route(Some(&test(WEBHOOK_WS2)), APP1),
        Err(WebhookAuthError::App(AppAccessError::Forbidden))
    );
    assert_eq!(
        keys.store_route(Some(&test(WEBHOOK)), "20000000-0000-4000-8000-0000000000ff"),
        Err(WebhookAuthError::App(AppAccessError::NotFound))
    );
    assert_eq!(
        keys.store_route(Some(&test(SDK)), "20000000-0000-4000-8000-0000000000ff"),
        key_error(AuthError::KeyTypeNotAllowed),
        "the key is checked before the app"
    );
    // In a deployment that accepts live keys, the live one passes.
    let live = keys.catalog.authenticate_webhook(
        Some(&text(KeyEnvironment::Live, WEBHOOK_LIVE)),
        KeyEnvironment::Live,
        app(APP1),
    );
    assert_eq!(live.map(|(r, _)| r.id.0.as_u128()), Ok(3));
}

#[test]
fn a_catalog_file_cannot_hold_a_webhook_key() {
    use flowgate_domain::catalog::{plan_import, CatalogFile};

    let mut file = catalog_json();
    file["workspaces"][0]["api_keys"] = serde_json::json!([
        {"key": text(KeyEnvironment::Test, WEBHOOK), "type": "webhook", "name": "revenuecat"}
    ]);
    let file: CatalogFile = serde_json::from_value(file).unwrap();
    let problems = match plan_import(
        file,
        &flowgate_domain::CatalogData::default(),
        datetime!(2026-03-01 00:00 UTC),
    ) {
        Ok(_) => panic!("a webhook key was accepted in a catalog file"),
        Err(problems) => problems,
    };
    assert!(
        problems
            .iter()
            .any(|p| p.pointer == "/workspaces/0/api_keys/0/type"
                && p.message.contains("flowgate keys create --type webhook")),
        "{problems:?}"
    );
}
