//! `KeyStore` beyond its contract suite (`flowgate_contract_tests::key_store`, run on both
//! backends): a key of an unknown workspace, keys created by the store.

use flowgate_domain::keys::KeyRecord;
use flowgate_domain::ports::{KeyStore, StoreError};
use time::macros::datetime;

use crate::support::{self, catalog, ws, WS2};

backend_tests! {
    async fn a_revocation_time_with_an_offset_is_the_same_instant(db) {
        // The contract suite revokes at UTC times; a store that kept the wall-clock time of
        // another offset as UTC would pass it.
        db.store.replace_catalog(&catalog()).await.expect("workspaces");
        let record = support::key_record(WS2, 'o', datetime!(2026-05-01 10:00 UTC));
        db.store.insert_key(record.clone()).await.expect("insert");
        let at = datetime!(2026-06-01 12:00:00.5 +02:00);
        let revoked = db.store.revoke_key(record.id, at).await.expect("revoke");
        assert_eq!(revoked.revoked_at, Some(at));
        let listed = db.store.list_keys(ws(WS2)).await.expect("list");
        assert_eq!(listed[0].revoked_at, Some(datetime!(2026-06-01 10:00:00.5 UTC)));
    }

    async fn a_key_of_an_unknown_workspace_is_not_found(db) {
        db.store.replace_catalog(&catalog()).await.expect("workspaces");
        let unknown = uuid::Uuid::from_u128(0x1000_0000_0000_4000_8000_0000_0000_00ff);
        let orphan = support::key_record(unknown, 'q', datetime!(2026-01-01 00:00 UTC));
        let err = db.store.insert_key(orphan).await.expect_err("unknown workspace");
        assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
        assert_eq!(db.store.list_keys(support::ws(unknown)).await.expect("list"), vec![]);
    }
}

backend_tests! {
    async fn create_key_returns_the_plaintext_once(db) {
        use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyType};
        use flowgate_domain::ports::CatalogSource;
        use flowgate_domain::Catalog;

        db.store.replace_catalog(&catalog()).await.expect("workspaces");
        let at = datetime!(2026-08-01 09:30 UTC);
        let created = flowgate_control::keys::create(&db.store, ws(WS2), KeyEnvironment::Live, KeyType::Sdk, "android", at)
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

        let other = flowgate_control::keys::create(&db.store, ws(WS2), KeyEnvironment::Test, KeyType::Secret, "", at)
            .await
            .expect("created");
        assert_ne!(other.key.expose(), text);
        assert_eq!(other.record.key_type, KeyType::Secret);
    }

    async fn create_key_for_an_unknown_workspace_fails_clearly(db) {
        use flowgate_domain::keys::{KeyEnvironment, KeyType};

        let missing = uuid::Uuid::from_u128(0x1000_0000_0000_4000_8000_0000_0000_00ff);
        let err = flowgate_control::keys::create(&db.store, ws(missing), KeyEnvironment::Test, KeyType::Sdk, "x", datetime!(2026-01-01 00:00 UTC))
            .await
            .expect_err("unknown workspace");
        assert_eq!(
            err,
            StoreError::NotFound { entity: "workspace", which: missing.to_string() }
        );
    }
}

backend_tests! {
    async fn a_release_0_2_0_read_of_api_keys_never_meets_a_webhook_key(db) {
        use flowgate_domain::keys::{KeyEnvironment, KeyType};
        use flowgate_domain::ports::CatalogSource;

        // Release 0.2.0 loads its catalog's keys with every row of `api_keys` and takes a key
        // type other than `sdk` and `secret` for corrupt data (D26): webhook keys (D30), made
        // every way this release makes them, live in `webhook_keys`.
        let mut data = catalog();
        let mut imported = support::key_record(WS2, 'i', datetime!(2026-05-01 09:00 UTC));
        imported.key_type = KeyType::Webhook;
        data.api_keys = vec![support::key_record(WS2, 's', datetime!(2026-05-01 09:00 UTC)), imported];
        db.store.replace_catalog(&data).await.expect("catalog with keys");
        let at = datetime!(2026-08-01 09:30 UTC);
        let created = flowgate_control::keys::create(&db.store, ws(WS2), KeyEnvironment::Test, KeyType::Webhook, "revenuecat", at)
            .await
            .expect("created");
        let mut inserted = support::key_record(WS2, 'w', at);
        inserted.key_type = KeyType::Webhook;
        db.store.insert_key(inserted.clone()).await.expect("inserted");
        db.store.revoke_key(inserted.id, at).await.expect("revoked");
        flowgate_control::keys::create(&db.store, ws(WS2), KeyEnvironment::Live, KeyType::Sdk, "android", at)
            .await
            .expect("created");

        assert_eq!(
            db.count("SELECT count(*) AS n FROM api_keys WHERE key_type NOT IN ('sdk', 'secret')").await,
            0,
            "0.2.0 would refuse its whole catalog"
        );
        assert_eq!(db.count("SELECT count(*) AS n FROM api_keys").await, 2, "the SDK keys");
        assert_eq!(
            db.count("SELECT count(*) AS n FROM webhook_keys WHERE key_type = 'webhook'").await,
            3
        );
        // And this release reads both tables as one list.
        let loaded = db.store.load_catalog().await.expect("load");
        let webhook = loaded.api_keys.iter().filter(|k| k.key_type == KeyType::Webhook).count();
        assert_eq!((loaded.api_keys.len(), webhook), (5, 3));
        assert!(loaded.api_keys.iter().any(|k| k.id == created.record.id));
        // A record inserted through the port goes to its type's table too.
        let record = KeyRecord { key_type: KeyType::Webhook, ..support::key_record(WS2, 'x', at) };
        db.store.insert_key(record).await.expect("inserted");
        assert_eq!(db.count("SELECT count(*) AS n FROM api_keys").await, 2);
        assert_eq!(db.count("SELECT count(*) AS n FROM webhook_keys").await, 4);
    }
}
