//! [`KeyStore`] contract: insert, list (oldest first, per workspace), revoke (the first time
//! kept), and the errors of unknown ids and duplicate digests (D1).
//!
//! Every case first writes the fixture catalog, because a key belongs to a workspace and a
//! database refuses a key of an unknown one.

use flowgate_domain::ids::KeyId;
use flowgate_domain::ids::WorkspaceId;
use flowgate_domain::keys::KeyRecord;
use flowgate_domain::ports::{KeyStore, StoreError};
use uuid::Uuid;

use crate::fixtures::{self, at, WS1, WS2};
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
