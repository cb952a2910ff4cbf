//! [`KeyStore`] on [`Store`] (D1): digests and metadata only, never a plaintext key.
//!
//! Two tables with the same columns: `api_keys` holds the `sdk` and `secret` keys, and
//! `webhook_keys` the `webhook` keys (D30). Release 0.2.0 reads every row of `api_keys` and
//! takes a key type it does not know for corrupt data ([`KeyRow::into_record`] did), so a
//! webhook key there would stop a 0.2.0 replica beside this release from loading its catalog
//! (D26); it never reads `webhook_keys`. Every operation of the port covers both tables: an
//! insert goes to its type's table, a list and the catalog load return both (oldest first), a
//! revoke by id finds the key in either. A key id and a digest are unique across both: the
//! insert checks the other table in its transaction (after its own write, so SQLite holds the
//! write lock; on PostgreSQL behind [`KEY_INSERT_LOCK_ID`]).

use diesel::prelude::*;
use flowgate_domain::ids::{KeyId, WorkspaceId};
use flowgate_domain::keys::{KeyDigest, KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::ports::{BoxFuture, KeyStore, StoreError};
use time::OffsetDateTime;

use crate::db::{columns, Conn};
use crate::error::{corrupt, TransactionError};
use crate::schema::{api_keys, webhook_keys};
use crate::store::Store;
use crate::types::{DbTimestamp, DbUuid};

/// An arbitrary constant: the PostgreSQL advisory lock (per transaction) that serialises this
/// release's key inserts, so that two inserts of one id into the two tables cannot both pass
/// the check of the other table.
const KEY_INSERT_LOCK_ID: i64 = 0x666c_6b65_7973; // "flkeys"

/// The columns of `webhook_keys` in [`KeyRow`]'s order: a webhook key reads as any other.
#[allow(clippy::type_complexity)]
pub(crate) fn webhook_columns() -> (
    webhook_keys::id,
    webhook_keys::workspace_id,
    webhook_keys::digest,
    webhook_keys::display_prefix,
    webhook_keys::key_type,
    webhook_keys::environment,
    webhook_keys::name,
    webhook_keys::created_at,
    webhook_keys::revoked_at,
) {
    (
        webhook_keys::id,
        webhook_keys::workspace_id,
        webhook_keys::digest,
        webhook_keys::display_prefix,
        webhook_keys::key_type,
        webhook_keys::environment,
        webhook_keys::name,
        webhook_keys::created_at,
        webhook_keys::revoked_at,
    )
}

/// Records in the order of the stored lists: by creation, then id (the order of both tables'
/// queries, kept when the two are merged).
pub(crate) fn sort_oldest_first(records: &mut [KeyRecord]) {
    records.sort_by_key(|k| (k.created_at, k.id));
}

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

/// A key record to insert into `api_keys` (an `sdk` or `secret` key).
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

/// A key record to insert into `webhook_keys` (a `webhook` key, D30): [`NewKey`]'s columns.
#[derive(Insertable)]
#[diesel(table_name = webhook_keys, treat_none_as_default_value = false)]
pub(crate) struct NewWebhookKey {
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

impl From<NewKey> for NewWebhookKey {
    fn from(k: NewKey) -> Self {
        Self {
            id: k.id,
            workspace_id: k.workspace_id,
            digest: k.digest,
            display_prefix: k.display_prefix,
            key_type: k.key_type,
            environment: k.environment,
            name: k.name,
            created_at: k.created_at,
            revoked_at: k.revoked_at,
        }
    }
}

/// True for the keys stored in `webhook_keys`.
pub(crate) fn in_webhook_table(record: &KeyRecord) -> bool {
    record.key_type == KeyType::Webhook
}

/// Inserts `record` into its type's table, then refuses it ([`StoreError::Conflict`], the
/// caller's transaction rolls back) when the other table has its id or digest.
async fn insert_into_its_table(
    conn: &mut Conn<'_>,
    record: &KeyRecord,
) -> Result<(), TransactionError> {
    if let Conn::Postgres(pg) = conn {
        diesel_async::RunQueryDsl::execute(
            diesel::sql_query(format!(
                "SELECT pg_advisory_xact_lock({KEY_INSERT_LOCK_ID})"
            )),
            &mut **pg,
        )
        .await?;
    }
    let row = NewKey::from_record(record);
    let id = row.id;
    let digest = row.digest.clone();
    let taken: i64 = if in_webhook_table(record) {
        conn.run(diesel::insert_into(webhook_keys::table).values(NewWebhookKey::from(row)))
            .await?;
        conn.row(
            api_keys::table
                .filter(api_keys::id.eq(id).or(api_keys::digest.eq(digest)))
                .count(),
        )
        .await?
    } else {
        conn.run(diesel::insert_into(api_keys::table).values(&row))
            .await?;
        conn.row(
            webhook_keys::table
                .filter(webhook_keys::id.eq(id).or(webhook_keys::digest.eq(digest)))
                .count(),
        )
        .await?
    };
    if taken > 0 {
        return Err(StoreError::Conflict {
            detail: format!(
                "key {} already exists (its id or digest is another key's)",
                record.id
            ),
        }
        .into());
    }
    Ok(())
}

impl KeyStore for Store {
    /// A duplicate id or digest, in either key table, is [`StoreError::Conflict`]; an unknown
    /// workspace is [`StoreError::NotFound`].
    fn insert_key(&self, record: KeyRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            self.db()
                .transaction(async |conn| insert_into_its_table(conn, &record).await)
                .await
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
                    // comes first so SQLite takes the write lock before reading. The id is in
                    // one of the two tables.
                    conn.run(
                        diesel::update(
                            api_keys::table
                                .find(id)
                                .filter(api_keys::revoked_at.is_null()),
                        )
                        .set(api_keys::revoked_at.eq(DbTimestamp(at))),
                    )
                    .await?;
                    conn.run(
                        diesel::update(
                            webhook_keys::table
                                .find(id)
                                .filter(webhook_keys::revoked_at.is_null()),
                        )
                        .set(webhook_keys::revoked_at.eq(DbTimestamp(at))),
                    )
                    .await?;
                    let row = conn
                        .row(api_keys::table.find(id).select(columns::<KeyRow>()))
                        .await
                        .optional()?;
                    Ok(match row {
                        Some(row) => Some(row),
                        None => conn
                            .row(webhook_keys::table.find(id).select(webhook_columns()))
                            .await
                            .optional()?,
                    })
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
            let mut rows: Vec<KeyRow> = self
                .db()
                .rows(
                    api_keys::table
                        .filter(api_keys::workspace_id.eq(DbUuid(workspace.0)))
                        .select(columns::<KeyRow>())
                        .order((api_keys::created_at, api_keys::id)),
                )
                .await?;
            rows.extend(
                self.db()
                    .rows::<_, KeyRow>(
                        webhook_keys::table
                            .filter(webhook_keys::workspace_id.eq(DbUuid(workspace.0)))
                            .select(webhook_columns())
                            .order((webhook_keys::created_at, webhook_keys::id)),
                    )
                    .await?,
            );
            let mut records = rows
                .into_iter()
                .map(KeyRow::into_record)
                .collect::<Result<Vec<_>, _>>()?;
            sort_oldest_first(&mut records);
            Ok(records)
        })
    }
}
