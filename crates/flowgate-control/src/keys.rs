//! API keys (D1, D13): what `flowgate keys create` and the console's keys page do.

use flowgate_domain::ids::{KeyId, WorkspaceId};
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::ports::{KeyStore, StoreError};
use time::OffsetDateTime;

/// A key just created: the plaintext, to show once and never again (D1), and the record the
/// store keeps.
#[derive(Debug)]
pub struct CreatedKey {
    /// The plaintext key (`Debug` redacts it; [`ApiKey::expose`] shows it).
    pub key: ApiKey,
    /// What is stored: digest, display prefix, type, environment, name, creation time.
    pub record: KeyRecord,
}

/// Creates a key of `workspace`: generated from the OS CSPRNG, its record (digest only)
/// stored, the plaintext returned once. An unknown workspace is [`StoreError::NotFound`]
/// naming the workspace.
pub async fn create(
    store: &dyn KeyStore,
    workspace: WorkspaceId,
    environment: KeyEnvironment,
    key_type: KeyType,
    name: impl Into<String>,
    now: OffsetDateTime,
) -> Result<CreatedKey, StoreError> {
    let key = ApiKey::generate(environment).map_err(|e| StoreError::Other {
        detail: format!("no randomness for a new key: {e}"),
    })?;
    let id = KeyId::from_uuid(uuid::Uuid::now_v7());
    let record = KeyRecord::new(id, workspace, &key, key_type, name, now);
    match store.insert_key(record.clone()).await {
        Ok(()) => Ok(CreatedKey { key, record }),
        // The only foreign key of either key table is the workspace.
        Err(StoreError::NotFound { .. }) => Err(StoreError::NotFound {
            entity: "workspace",
            which: workspace.to_string(),
        }),
        Err(e) => Err(e),
    }
}
