//! `KeyStore`: insert, list (oldest first, per workspace), revoke (first time kept), errors.

use flowgate_domain::ids::KeyId;
use flowgate_domain::ports::{KeyStore, StoreError};
use time::macros::datetime;

use crate::support::{self, catalog, ws, WS1, WS2};

backend_tests! {
    async fn keys_insert_list_revoke(db) {
        db.store.replace_catalog(&catalog()).await.expect("workspaces");
        let newer = support::key_record(WS1, 'n', datetime!(2026-05-02 10:00:00.123456 UTC));
        let older = support::key_record(WS1, 'o', datetime!(2026-05-01 10:00 UTC));
        let elsewhere = support::key_record(WS2, 'e', datetime!(2026-04-01 10:00 UTC));
        for record in [&newer, &older, &elsewhere] {
            db.store.insert_key(record.clone()).await.expect("insert");
        }

        let listed = db.store.list_keys(ws(WS1)).await.expect("list");
        let ids: Vec<KeyId> = listed.iter().map(|k| k.id).collect();
        // The fixture's two keys (January) come first, then ours, oldest first.
        assert_eq!(ids.len(), 4);
        assert_eq!(&ids[2..], &[older.id, newer.id]);
        assert_eq!(listed[3], newer, "stored exactly (microsecond timestamps)");
        assert_eq!(db.store.list_keys(ws(WS2)).await.expect("list"), vec![elsewhere]);

        let first = datetime!(2026-06-01 12:00:00.5 +02:00);
        let revoked = db.store.revoke_key(newer.id, first).await.expect("revoke");
        assert_eq!(revoked.revoked_at, Some(first));
        assert_eq!(revoked.digest, newer.digest);
        let again = db
            .store
            .revoke_key(newer.id, datetime!(2026-07-01 00:00 UTC))
            .await
            .expect("revoke again");
        assert_eq!(again.revoked_at, Some(first), "the first revocation time is kept");
        let listed = db.store.list_keys(ws(WS1)).await.expect("list");
        assert_eq!(listed[3].revoked_at, Some(first));
    }

    async fn key_errors(db) {
        db.store.replace_catalog(&catalog()).await.expect("workspaces");
        let unknown = KeyId::from_uuid(uuid::Uuid::new_v4());
        let err = db
            .store
            .revoke_key(unknown, datetime!(2026-01-01 00:00 UTC))
            .await
            .expect_err("unknown id");
        assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");

        let record = support::key_record(WS1, 'd', datetime!(2026-01-01 00:00 UTC));
        db.store.insert_key(record.clone()).await.expect("insert");
        let mut same_digest = support::key_record(WS1, 'd', datetime!(2026-01-01 00:00 UTC));
        same_digest.name = "copy".to_owned();
        let err = db.store.insert_key(same_digest).await.expect_err("duplicate digest");
        assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");

        let orphan = support::key_record(
            "10000000-0000-4000-8000-0000000000ff",
            'q',
            datetime!(2026-01-01 00:00 UTC),
        );
        let err = db.store.insert_key(orphan).await.expect_err("unknown workspace");
        assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    }
}

backend_tests! {
    async fn create_key_returns_the_plaintext_once(db) {
        use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyType};
        use flowgate_domain::ports::CatalogSource;
        use flowgate_domain::Catalog;

        db.store.replace_catalog(&catalog()).await.expect("workspaces");
        let at = datetime!(2026-08-01 09:30 UTC);
        let created = db
            .store
            .create_key(ws(WS2), KeyEnvironment::Live, KeyType::Sdk, "android", at)
            .await
            .expect("created");
        let text = created.key.expose().to_owned();
        assert!(text.starts_with("fg_live_"), "{text}");
        assert_eq!(ApiKey::parse(&text).map(|k| k.digest()), Ok(created.record.digest));
        assert_eq!(created.record.display_prefix, &text[..12]);
        assert_eq!((created.record.name.as_str(), created.record.created_at), ("android", at));
        // Stored as a record (never the plaintext) and listed.
        assert_eq!(db.store.list_keys(ws(WS2)).await.expect("list"), vec![created.record.clone()]);
        // The key authenticates once the catalog reloads.
        let catalog = Catalog::build(db.store.load_catalog().await.expect("load")).expect("builds");
        let record = catalog
            .authenticate(Some(&text), KeyEnvironment::Live)
            .expect("authenticates");
        assert_eq!(record.id, created.record.id);

        let other = db
            .store
            .create_key(ws(WS2), KeyEnvironment::Test, KeyType::Secret, "", at)
            .await
            .expect("created");
        assert_ne!(other.key.expose(), text);
        assert_eq!(other.record.key_type, KeyType::Secret);
    }

    async fn create_key_for_an_unknown_workspace_fails_clearly(db) {
        use flowgate_domain::keys::{KeyEnvironment, KeyType};

        let missing = "10000000-0000-4000-8000-0000000000ff";
        let err = db
            .store
            .create_key(ws(missing), KeyEnvironment::Test, KeyType::Sdk, "x", datetime!(2026-01-01 00:00 UTC))
            .await
            .expect_err("unknown workspace");
        assert_eq!(
            err,
            StoreError::NotFound { entity: "workspace", which: missing.to_owned() }
        );
    }
}
