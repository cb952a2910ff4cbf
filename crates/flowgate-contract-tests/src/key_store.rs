//! [`KeyStore`] contract: insert, list (oldest first, per workspace), revoke (the first time
//! kept), and the errors of unknown ids and duplicate digests (D1); webhook keys (D30) beside
//! the others, whichever table a store keeps them in (the database store: `webhook_keys`).
//!
//! Every case first writes the fixture catalog, because a key belongs to a workspace and a
//! database refuses a key of an unknown one.

use flowgate_domain::catalog::{CatalogData, WebhookAuthError};
use flowgate_domain::ids::KeyId;
use flowgate_domain::ids::{AppId, WorkspaceId};
use flowgate_domain::keys::{AuthError, KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::ports::{CatalogSource, KeyStore, StoreError};
use flowgate_domain::Catalog;
use uuid::Uuid;

use crate::fixtures::{self, at, APP1, WS1, WS2};
use crate::Harness;

async fn with_workspaces<H: Harness>(h: &H) {
    if let Err(e) = h.write_catalog(&fixtures::catalog()).await {
        panic!("writing the fixture catalog: {e}");
    }
}

async fn insert<S: KeyStore + ?Sized>(store: &S, record: &KeyRecord) {
    assert_eq!(
        store.insert_key(record.clone()).await,
        Ok(()),
        "insert {}",
        record.name
    );
}

async fn list<S: KeyStore + ?Sized>(store: &S, workspace: Uuid) -> Vec<KeyRecord> {
    match store.list_keys(WorkspaceId::from_uuid(workspace)).await {
        Ok(keys) => keys,
        Err(e) => panic!("list_keys: {e}"),
    }
}

/// Inserted keys are listed exactly as written, per workspace, oldest first whatever the
/// insertion order; a workspace without keys lists none.
pub async fn insert_and_list_oldest_first_per_workspace<H: Harness>(h: &H) {
    with_workspaces(h).await;
    let store = h.store();
    assert_eq!(list(store, WS1).await, []);
    let newer = fixtures::key_record(WS1, 'n', at(20));
    let older = fixtures::key_record(WS1, 'o', at(10));
    let elsewhere = fixtures::key_record(WS2, 'e', at(0));
    for record in [&newer, &elsewhere, &older] {
        insert(store, record).await;
    }
    assert_eq!(list(store, WS1).await, [older, newer]);
    assert_eq!(list(store, WS2).await, [elsewhere]);
}

/// Revoking returns the revoked record; revoking again keeps the first time; the list shows
/// the first time.
pub async fn revoke_keeps_first_time<H: Harness>(h: &H) {
    with_workspaces(h).await;
    let store = h.store();
    let record = fixtures::key_record(WS1, 'k', at(0));
    insert(store, &record).await;

    let mut expected = record.clone();
    expected.revoked_at = Some(at(5));
    assert_eq!(
        store.revoke_key(record.id, at(5)).await,
        Ok(expected.clone())
    );
    assert_eq!(
        store.revoke_key(record.id, at(9)).await,
        Ok(expected.clone())
    );
    assert_eq!(list(store, WS1).await, [expected]);
}

/// Revoking an id no key has is [`StoreError::NotFound`] and changes nothing.
pub async fn revoke_unknown_id_is_not_found<H: Harness>(h: &H) {
    with_workspaces(h).await;
    let store = h.store();
    let record = fixtures::key_record(WS1, 'k', at(0));
    insert(store, &record).await;
    let unknown = KeyId::from_uuid(Uuid::from_u128(0x7fff_0000_0000_4000_8000_0000_0000_0001));
    let result = store.revoke_key(unknown, at(1)).await;
    assert!(
        matches!(result, Err(StoreError::NotFound { .. })),
        "{result:?}"
    );
    assert_eq!(list(store, WS1).await, [record]);
}

/// A second key with a stored digest (another id and name) is [`StoreError::Conflict`] and
/// is not stored.
pub async fn duplicate_digest_is_conflict<H: Harness>(h: &H) {
    with_workspaces(h).await;
    let store = h.store();
    let record = fixtures::key_record(WS1, 'd', at(0));
    insert(store, &record).await;
    let mut copy = record.clone();
    copy.id = KeyId::from_uuid(Uuid::from_u128(0x7fff_0000_0000_4000_8000_0000_0000_0002));
    copy.name = "copy".to_owned();
    let result = store.insert_key(copy).await;
    assert!(
        matches!(result, Err(StoreError::Conflict { .. })),
        "{result:?}"
    );
    assert_eq!(list(store, WS1).await, [record]);
}

/// A webhook key record of `workspace` for [`fixtures::api_key`]`(fill)`.
fn webhook_record(workspace: Uuid, fill: char, n: i64) -> KeyRecord {
    KeyRecord {
        key_type: KeyType::Webhook,
        name: format!("webhook {fill}"),
        ..fixtures::key_record(workspace, fill, at(n))
    }
}

async fn revision_of<S: CatalogSource + ?Sized>(store: &S) -> u64 {
    match store.revision().await {
        Ok(revision) => revision,
        Err(e) => panic!("revision: {e}"),
    }
}

async fn loaded<S: CatalogSource + ?Sized>(store: &S) -> CatalogData {
    match store.load_catalog().await {
        Ok(data) => data,
        Err(e) => panic!("load_catalog: {e}"),
    }
}

fn built(data: CatalogData) -> Catalog {
    match Catalog::build(data) {
        Ok(catalog) => catalog,
        Err(e) => panic!("the loaded catalog does not build: {e:?}"),
    }
}

/// What the store routes' check answers for the webhook key `fill` on the fixture app.
fn on_store_route(catalog: &Catalog, fill: char) -> Result<KeyId, WebhookAuthError> {
    catalog
        .authenticate_webhook(
            Some(fixtures::api_key(fill).expose()),
            KeyEnvironment::Test,
            AppId::from_uuid(APP1),
        )
        .map(|(record, _)| record.id)
}

/// A webhook key (D30) goes round the whole cycle beside SDK keys: inserted (the revision
/// moves), listed with them oldest first with its type, loaded with the catalog so the
/// snapshot authenticates it on the store routes only, revoked by its id (the revision moves,
/// the first time is kept), and then refused.
pub async fn webhook_key_round_trip<H: Harness>(h: &H) {
    with_workspaces(h).await;
    let store = h.store();
    let older = fixtures::key_record(WS1, 'a', at(0));
    let webhook = webhook_record(WS1, 'w', 5);
    let newer = fixtures::key_record(WS1, 'b', at(10));
    let elsewhere = webhook_record(WS2, 'e', 1);
    insert(store, &older).await;
    insert(store, &newer).await;
    let before = revision_of(store).await;
    insert(store, &webhook).await;
    let after = revision_of(store).await;
    assert!(
        after > before,
        "revision {after} after inserting a webhook key ({before})"
    );
    insert(store, &elsewhere).await;

    assert_eq!(
        list(store, WS1).await,
        [older.clone(), webhook.clone(), newer.clone()]
    );
    assert_eq!(list(store, WS2).await, std::slice::from_ref(&elsewhere));

    let mut data = loaded(store).await;
    data.api_keys.sort_by_key(|k| (k.created_at, k.id));
    assert_eq!(
        data.api_keys,
        [
            older.clone(),
            elsewhere.clone(),
            webhook.clone(),
            newer.clone()
        ],
        "the loaded catalog carries the webhook keys with the others"
    );
    let catalog = built(data);
    assert_eq!(on_store_route(&catalog, 'w'), Ok(webhook.id));
    assert_eq!(
        catalog
            .authenticate(Some(fixtures::api_key('w').expose()), KeyEnvironment::Test)
            .map(|r| r.id),
        Err(AuthError::KeyTypeNotAllowed),
        "the SDK routes refuse it"
    );
    assert_eq!(
        on_store_route(&catalog, 'a'),
        Err(WebhookAuthError::Key(AuthError::KeyTypeNotAllowed)),
        "the store routes refuse an SDK key"
    );

    let mut revoked = webhook.clone();
    revoked.revoked_at = Some(at(20));
    let before = revision_of(store).await;
    assert_eq!(
        store.revoke_key(webhook.id, at(20)).await,
        Ok(revoked.clone())
    );
    let after = revision_of(store).await;
    assert!(
        after > before,
        "revision {after} after revoking a webhook key ({before})"
    );
    assert_eq!(
        store.revoke_key(webhook.id, at(30)).await,
        Ok(revoked.clone())
    );
    assert_eq!(list(store, WS1).await, [older, revoked.clone(), newer]);

    let data = loaded(store).await;
    assert!(data.api_keys.contains(&revoked), "{:?}", data.api_keys);
    let catalog = built(data);
    assert_eq!(catalog.key(&webhook.digest), None);
    assert_eq!(
        on_store_route(&catalog, 'w'),
        Err(WebhookAuthError::Key(AuthError::InvalidApiKey)),
        "a revoked webhook key is refused like an unknown one"
    );
}

/// Key ids and digests are unique across the key types: a webhook key with an SDK key's id or
/// digest is [`StoreError::Conflict`], and so is an SDK key with a webhook key's; nothing of
/// the refused insert is stored. (A revoke by id must find one key.)
pub async fn ids_and_digests_are_unique_across_key_types<H: Harness>(h: &H) {
    with_workspaces(h).await;
    let store = h.store();
    let sdk = fixtures::key_record(WS1, 'a', at(0));
    let webhook = webhook_record(WS1, 'w', 1);
    insert(store, &sdk).await;
    insert(store, &webhook).await;

    let conflict = |result: Result<(), StoreError>, what: &str| {
        assert!(
            matches!(result, Err(StoreError::Conflict { .. })),
            "{what}: {result:?}"
        );
    };
    // A webhook key with the SDK key's id (another key), and with its digest (another id).
    let same_id = KeyRecord {
        id: sdk.id,
        ..webhook_record(WS1, 'x', 2)
    };
    conflict(
        store.insert_key(same_id).await,
        "webhook key with an SDK key's id",
    );
    let same_digest = KeyRecord {
        key_type: KeyType::Webhook,
        ..fixtures::key_record(WS1, 'a', at(3))
    };
    let same_digest = KeyRecord {
        id: KeyId::from_uuid(Uuid::from_u128(0x7fff_0000_0000_4000_8000_0000_0000_0003)),
        ..same_digest
    };
    conflict(
        store.insert_key(same_digest).await,
        "webhook key with an SDK key's digest",
    );
    // An SDK key with the webhook key's id, and with its digest.
    let same_id = KeyRecord {
        id: webhook.id,
        ..fixtures::key_record(WS1, 'y', at(4))
    };
    conflict(
        store.insert_key(same_id).await,
        "SDK key with a webhook key's id",
    );
    let same_digest = KeyRecord {
        id: KeyId::from_uuid(Uuid::from_u128(0x7fff_0000_0000_4000_8000_0000_0000_0004)),
        ..fixtures::key_record(WS1, 'w', at(5))
    };
    conflict(
        store.insert_key(same_digest).await,
        "SDK key with a webhook key's digest",
    );

    assert_eq!(list(store, WS1).await, [sdk.clone(), webhook.clone()]);
    // Each id revokes its own key.
    let revoked = store.revoke_key(webhook.id, at(9)).await;
    assert_eq!(
        revoked.map(|r| (r.key_type, r.revoked_at)),
        Ok((KeyType::Webhook, Some(at(9))))
    );
    let revoked = store.revoke_key(sdk.id, at(9)).await;
    assert_eq!(
        revoked.map(|r| (r.key_type, r.revoked_at)),
        Ok((KeyType::Sdk, Some(at(9))))
    );
}
