//! The in-memory reference implementation of the storage ports.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ids::{KeyId, WorkspaceId};
use flowgate_domain::keys::{KeyEnvironment, KeyType};
use flowgate_domain::memory::InMemoryStore;
use flowgate_domain::ports::{AppendOutcome, CatalogSource, EventStore, KeyStore, StoreError};
use flowgate_domain::Catalog;
use time::macros::datetime;

use crate::fixtures::*;

/// The in-memory store's futures are ready at once: poll once, no runtime needed.
fn ready<T>(f: impl Future<Output = T>) -> T {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("in-memory futures are always ready"),
    }
}

#[test]
fn catalog_and_keys_round_trip_into_a_snapshot_and_bump_the_revision() {
    let store = InMemoryStore::new();
    assert_eq!(ready(store.revision()), Ok(0));
    store.set_catalog(data_from(&catalog_json()));
    let r1 = ready(store.revision()).unwrap();
    let k = key(KeyEnvironment::Test, 'm');
    ready(store.insert_key(record(WS1, &k, KeyType::Sdk, 9))).unwrap();
    let r2 = ready(store.wait_for_change(r1, Duration::from_secs(1))).unwrap();
    assert!(r2 > r1, "a key insert changes the revision");

    let data = ready(store.load_catalog()).unwrap();
    assert_eq!(data.revision, r2);
    let catalog = Catalog::build(data).unwrap();
    assert_eq!(catalog.revision(), r2);
    assert!(catalog
        .authenticate(Some(k.expose()), KeyEnvironment::Test)
        .is_ok());
}

#[test]
fn keys_insert_revoke_list() {
    let store = InMemoryStore::new();
    let ws: WorkspaceId = WS1.parse().unwrap();
    let a = record(WS1, &key(KeyEnvironment::Test, 'a'), KeyType::Sdk, 1);
    let mut b = record(WS1, &key(KeyEnvironment::Live, 'b'), KeyType::Sdk, 2);
    b.created_at = datetime!(2025-06-01 00:00 UTC);
    ready(store.insert_key(a.clone())).unwrap();
    ready(store.insert_key(b.clone())).unwrap();
    assert!(matches!(
        ready(store.insert_key(a.clone())),
        Err(StoreError::Conflict { .. })
    ));
    let listed: Vec<KeyId> = ready(store.list_keys(ws))
        .unwrap()
        .into_iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(listed, vec![b.id, a.id], "oldest first");
    assert!(ready(store.list_keys(WS2.parse().unwrap()))
        .unwrap()
        .is_empty());

    let first = datetime!(2026-03-01 00:00 UTC);
    assert_eq!(
        ready(store.revoke_key(a.id, first)).unwrap().revoked_at,
        Some(first)
    );
    let revision = ready(store.revision()).unwrap();
    let again = ready(store.revoke_key(a.id, datetime!(2026-04-01 00:00 UTC))).unwrap();
    assert_eq!(
        ready(store.revision()),
        Ok(revision),
        "a second revoke changes nothing"
    );
    assert_eq!(
        again.revoked_at,
        Some(first),
        "revoking twice keeps the first time"
    );
    let unknown = KeyId::from_uuid(uuid::Uuid::from_u128(77));
    assert!(matches!(
        ready(store.revoke_key(unknown, first)),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn event_appends_are_idempotent_on_event_id() {
    let store = InMemoryStore::new();
    let batch = vec![
        AnalyticsEvent::sample(1),
        AnalyticsEvent::sample(2),
        AnalyticsEvent::sample(1),
    ];
    assert_eq!(
        ready(store.append_events(&batch)),
        Ok(AppendOutcome {
            inserted: 2,
            duplicates: 1
        })
    );
    assert_eq!(
        ready(store.append_events(&batch)),
        Ok(AppendOutcome {
            inserted: 0,
            duplicates: 3
        })
    );
    let stored: Vec<_> = store.events().iter().map(|e| e.event_id).collect();
    assert_eq!(
        stored,
        [1, 2].map(|n| AnalyticsEvent::sample(n).event_id),
        "each stored once, in order"
    );
}
