//! Fixtures: the contract suite's catalog, keys and events (`flowgate_contract_tests::fixtures`,
//! one definition for every crate's tests), and test databases (a PostgreSQL database or SQLite
//! file per test, cleaned up even after a panic) from flowgate-testkit.

use flowgate_domain::ids::WorkspaceId;

pub use flowgate_contract_tests::fixtures::{
    catalog, key_record, APP1, EXACT_SCHEMA, FLOW_US, V_US_2, WS1, WS2,
};
pub use flowgate_testkit::TestDb;

/// The workspace id of a fixture's UUID.
pub fn ws(id: uuid::Uuid) -> WorkspaceId {
    WorkspaceId::from_uuid(id)
}
