//! [`KeyStore`] on [`Store`] (D1): digests and metadata only, never a plaintext key.

use diesel::prelude::*;
use flowgate_domain::ids::{KeyId, WorkspaceId};
use flowgate_domain::keys::{ApiKey, KeyDigest, KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::ports::{BoxFuture, KeyStore, StoreError};
use time::OffsetDateTime;

use crate::db::columns;
use crate::error::corrupt;
use crate::schema::api_keys;
use crate::store::Store;
use crate::types::{DbTimestamp, DbUuid};

/// A stored key record as read.
#[derive(Queryable, Selectable)]
#[diesel(table_name = api_keys)]
pub(crate) struct KeyRow {
    id: DbUuid,
    workspace_id: DbUuid,
    digest: Vec<u8>,
    display_prefix: String,
    key_type: String,
    environment: String,
    name: String,
    created_at: DbTimestamp,
    revoked_at: Option<DbTimestamp>,
}

impl KeyRow {
    pub(crate) fn into_record(self) -> Result<KeyRecord, StoreError> {
        let digest: [u8; 32] = self.digest.as_slice().try_into().map_err(|_| {
            corrupt(format!(
                "key {} has a digest of {} bytes",
                self.id.0,
                self.digest.len()
            ))
        })?;
        Ok(KeyRecord {
            id: KeyId(self.id.0),
            workspace_id: WorkspaceId(self.workspace_id.0),
            digest: KeyDigest(digest),
            display_prefix: self.display_prefix,
            key_type: KeyType::parse(&self.key_type)
                .ok_or_else(|| corrupt(format!("unknown key type `{}`", self.key_type)))?,
            environment: KeyEnvironment::parse(&self.environment).ok_or_else(|| {
                corrupt(format!("unknown key environment `{}`", self.environment))
            })?,
            name: self.name,
            created_at: self.created_at.0,
            revoked_at: self.revoked_at.map(|t| t.0),
        })
    }
}

/// A key record to insert.
#[derive(Insertable)]
#[diesel(table_name = api_keys, treat_none_as_default_value = false)]
pub(crate) struct NewKey {
    id: DbUuid,
    workspace_id: DbUuid,
    digest: Vec<u8>,
    display_prefix: String,
    key_type: &'static str,
    environment: &'static str,
    name: String,
    created_at: DbTimestamp,
    revoked_at: Option<DbTimestamp>,
}

impl NewKey {
    pub(crate) fn from_record(record: &KeyRecord) -> Self {
        Self {
            id: DbUuid(record.id.0),
            workspace_id: DbUuid(record.workspace_id.0),
            digest: record.digest.0.to_vec(),
            display_prefix: record.display_prefix.clone(),
            key_type: record.key_type.as_str(),
            environment: record.environment.as_str(),
            name: record.name.clone(),
            created_at: DbTimestamp(record.created_at),
            revoked_at: record.revoked_at.map(DbTimestamp),
        }
    }
}

impl KeyStore for Store {
    /// A duplicate id or digest is [`StoreError::Conflict`]; an unknown workspace is
    /// [`StoreError::NotFound`].
    fn insert_key(&self, record: KeyRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let row = NewKey::from_record(&record);
            self.db()
                .run(diesel::insert_into(api_keys::table).values(&row))
                .await?;
            Ok(())
        })
    }

    fn revoke_key(
        &self,
        id: KeyId,
        at: OffsetDateTime,
    ) -> BoxFuture<'_, Result<KeyRecord, StoreError>> {
        Box::pin(async move {
            let id = DbUuid(id.0);
            let row: Option<KeyRow> = self
                .db()
                .transaction(async |conn| {
                    // Only a key not yet revoked is updated: the first revocation time is kept,
                    // and revoking twice changes no row (so the revision stays, D12). The update
                    // comes first so SQLite takes the write lock before reading.
                    conn.run(
                        diesel::update(
                            api_keys::table
                                .find(id)
                                .filter(api_keys::revoked_at.is_null()),
                        )
                        .set(api_keys::revoked_at.eq(DbTimestamp(at))),
                    )
                    .await?;
                    Ok(conn
                        .row(api_keys::table.find(id).select(columns::<KeyRow>()))
                        .await
                        .optional()?)
                })
                .await?;
            row.ok_or_else(|| StoreError::NotFound {
                entity: "API key",
                which: id.0.to_string(),
            })?
            .into_record()
        })
    }

    fn list_keys(
        &self,
        workspace: WorkspaceId,
    ) -> BoxFuture<'_, Result<Vec<KeyRecord>, StoreError>> {
        Box::pin(async move {
            let rows: Vec<KeyRow> = self
                .db()
                .rows(
                    api_keys::table
                        .filter(api_keys::workspace_id.eq(DbUuid(workspace.0)))
                        .select(columns::<KeyRow>())
                        .order((api_keys::created_at, api_keys::id)),
                )
                .await?;
            rows.into_iter().map(KeyRow::into_record).collect()
        })
    }
}

/// A key just created by [`Store::create_key`]: the plaintext, to show once and never again
/// (D1), and the record the store keeps.
#[derive(Debug)]
pub struct CreatedKey {
    /// The plaintext key (`Debug` redacts it; [`ApiKey::expose`] shows it).
    pub key: ApiKey,
    /// What is stored: digest, display prefix, type, environment, name, creation time.
    pub record: KeyRecord,
}

impl Store {
    /// Creates a key for `flowgate keys create` (D13): generates it from the OS CSPRNG, stores
    /// its record (digest only) and returns the plaintext once. An unknown workspace is
    /// [`StoreError::NotFound`] naming the workspace.
    pub async fn create_key(
        &self,
        workspace: WorkspaceId,
        environment: KeyEnvironment,
        key_type: KeyType,
        name: impl Into<String>,
        now: OffsetDateTime,
    ) -> Result<CreatedKey, StoreError> {
        let key = ApiKey::generate(environment).map_err(|e| StoreError::Other {
            detail: format!("no randomness for a new key: {e}"),
        })?;
        let record = KeyRecord::new(
            KeyId::from_uuid(uuid::Uuid::now_v7()),
            workspace,
            &key,
            key_type,
            name,
            now,
        );
        match self.insert_key(record.clone()).await {
            Ok(()) => Ok(CreatedKey { key, record }),
            // The only foreign key of api_keys is the workspace.
            Err(StoreError::NotFound { .. }) => Err(StoreError::NotFound {
                entity: "workspace",
                which: workspace.to_string(),
            }),
            Err(e) => Err(e),
        }
    }
}
