//! Migrations: up, up again (no change), down (all), up again, on both backends.

use diesel::migration::MigrationSource;
use flowgate_domain::ports::CatalogSource;
use flowgate_store::{Backend, POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS};

use crate::support::TestDb;

async fn up_down_up(db: TestDb) {
    let store = &db.store;
    let embedded = match db.backend() {
        Backend::Postgres => MigrationSource::<diesel::pg::Pg>::migrations(&POSTGRES_MIGRATIONS)
            .expect("embedded migrations")
            .len(),
        Backend::Sqlite => {
            MigrationSource::<diesel::sqlite::Sqlite>::migrations(&SQLITE_MIGRATIONS)
                .expect("embedded migrations")
                .len()
        }
    };
    assert!(embedded >= 1);

    let applied = store.migrate().await.expect("up");
    assert_eq!(
        applied.len(),
        embedded,
        "every migration applied: {applied:?}"
    );
    assert_eq!(
        store.applied_migrations().await.expect("list").len(),
        embedded
    );
    let revision = store.revision().await.expect("revision");
    assert_eq!(revision, 1, "a fresh catalog starts at revision 1");

    // Applying again changes nothing.
    assert_eq!(
        store.migrate().await.expect("up again"),
        Vec::<String>::new()
    );
    assert_eq!(store.revision().await.expect("revision"), revision);
    assert_eq!(
        store.applied_migrations().await.expect("list").len(),
        embedded
    );

    let reverted = store.revert_all_migrations().await.expect("down");
    assert_eq!(reverted.len(), embedded);
    assert!(store.applied_migrations().await.expect("list").is_empty());
    assert!(
        store.revision().await.is_err(),
        "the tables are gone after reverting"
    );
    if db.backend() == Backend::Postgres {
        assert_eq!(
            db.count("SELECT count(*) AS n FROM pg_proc WHERE proname LIKE 'flowgate%'")
                .await,
            0,
            "down drops the trigger function too"
        );
    }

    assert_eq!(
        store.migrate().await.expect("up after down").len(),
        embedded
    );
    let data = store.load_catalog().await.expect("load after up, down, up");
    assert_eq!(data.revision, 1);
    assert!(data.workspaces.is_empty() && data.api_keys.is_empty());
}

// On a current-thread runtime on purpose: diesel-async's migration harness drives its connection
// with `block_in_place`, which panics on such a runtime's worker; the store runs it on the
// blocking pool, so migrations work on either runtime.
#[tokio::test]
async fn up_down_up_postgres() {
    if let Some(db) = TestDb::postgres_unmigrated().await {
        up_down_up(db).await;
    }
}

#[tokio::test]
async fn up_down_up_sqlite() {
    up_down_up(TestDb::sqlite_unmigrated()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_migrators_on_postgres_do_not_collide() {
    let Some(db) = TestDb::postgres_unmigrated().await else {
        return;
    };
    let other = db.open_another();
    let (a, b) = tokio::join!(db.store.migrate(), other.migrate());
    let (a, b) = (a.expect("first migrator"), b.expect("second migrator"));
    assert!(
        a.is_empty() != b.is_empty(),
        "exactly one of them applied the migrations: {a:?} / {b:?}"
    );
}
