//! The three implementations under test, as [`Harness`]es.
//!
//! - [`Memory`]: the domain's `InMemoryStore`.
//! - [`Sqlite`]: the store on a SQLite file in a fresh temporary folder.
//! - [`Postgres`]: the store on its own PostgreSQL database.
//!
//! Databases come from flowgate-testkit's `TestDb`: created per test, removed on drop (also
//! after a panic), leftovers of crashed runs swept, and a missing PostgreSQL is a failure unless
//! `FLOWGATE_TEST_SKIP_PG=1`.

use flowgate_contract_tests::Harness;
use flowgate_domain::catalog::CatalogData;
use flowgate_domain::memory::InMemoryStore;
use flowgate_domain::ports::StoreError;
use flowgate_store::Store;
use flowgate_testkit::TestDb;

pub struct Memory(InMemoryStore);

impl Harness for Memory {
    type Store = InMemoryStore;

    async fn create() -> Option<Self> {
        Some(Memory(InMemoryStore::new()))
    }

    fn store(&self) -> &InMemoryStore {
        &self.0
    }

    async fn write_catalog(&self, data: &CatalogData) -> Result<(), StoreError> {
        self.0.set_catalog(data.clone());
        Ok(())
    }
}

pub struct Sqlite(TestDb);

impl Harness for Sqlite {
    type Store = Store;

    async fn create() -> Option<Self> {
        Some(Sqlite(TestDb::sqlite().await))
    }

    fn store(&self) -> &Store {
        &self.0.store
    }

    async fn write_catalog(&self, data: &CatalogData) -> Result<(), StoreError> {
        self.0.store.replace_catalog(data).await
    }
}

pub struct Postgres(TestDb);

impl Harness for Postgres {
    type Store = Store;

    async fn create() -> Option<Self> {
        TestDb::postgres().await.map(Postgres)
    }

    fn store(&self) -> &Store {
        &self.0.store
    }

    async fn write_catalog(&self, data: &CatalogData) -> Result<(), StoreError> {
        self.0.store.replace_catalog(data).await
    }
}
