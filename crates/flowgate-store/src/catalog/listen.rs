//! Waiting for a catalog change on PostgreSQL: a notification on [`CATALOG_CHANNEL`] on the
//! dedicated listening connection (D12).

use diesel_async::{AsyncPgConnection, RunQueryDsl};
use flowgate_domain::ports::{Outage, StoreError};
use futures_util::StreamExt;
use tokio::time::Instant;

use super::{decode_revision, revision_query, CATALOG_CHANNEL};
use crate::db::Postgres;
use crate::error::{connection_error, query_error, unavailable};

impl Postgres {
    /// Waits for a notification on [`CATALOG_CHANNEL`] on the dedicated listening connection
    /// until the revision differs from `known` or the deadline passes; `None` when another
    /// waiter holds the connection until the deadline (the caller then reads the revision: it
    /// paces its own polling).
    ///
    /// The connection is made by the store's connector and handed to diesel-async with its
    /// connection future, so it receives notifications; it is not pooled, so it keeps
    /// listening between calls and notifications sent while nobody waits are buffered.
    /// `LISTEN` is issued before the revision is read, so a change committed between the read
    /// and the wait still wakes us. The connection is taken out of its slot while in use: if
    /// this future is dropped mid-way, the connection is dropped too and the next call makes
    /// a fresh one. Any failure drops it as well (a lost connection is
    /// [`StoreError::Unavailable`]).
    pub(super) async fn wait_for_change(
        &self,
        known: u64,
        deadline: Instant,
    ) -> Result<Option<u64>, StoreError> {
        let Ok(mut slot) = tokio::time::timeout_at(deadline, self.listener.lock()).await else {
            return Ok(None);
        };
        let mut conn = match slot.take() {
            Some(conn) => conn,
            None => {
                let mut conn = self
                    .connector
                    .connect(self.connect_timeout)
                    .await
                    .map_err(connection_error)?;
                diesel::sql_query(format!("LISTEN {CATALOG_CHANNEL}"))
                    .execute(&mut conn)
                    .await
                    .map_err(query_error)?;
                conn
            }
        };
        let result = wait_on_listener(&mut conn, known, deadline).await;
        if result.is_ok() {
            *slot = Some(conn);
        }
        result.map(Some)
    }
}

/// Waits on an established listening connection until the revision differs from `known` or the
/// deadline passes.
pub(super) async fn wait_on_listener(
    conn: &mut AsyncPgConnection,
    known: u64,
    deadline: Instant,
) -> Result<u64, StoreError> {
    loop {
        // Read after LISTEN (and after each wake-up): notifications buffered from earlier
        // changes only cost this one read.
        let current = read_revision(conn).await?;
        if current != known {
            return Ok(current);
        }
        let next = {
            let mut notifications = std::pin::pin!(conn.notifications_stream());
            tokio::time::timeout_at(deadline, notifications.next()).await
        };
        match next {
            // The deadline passed: report the revision as it is now.
            Err(_elapsed) => return read_revision(conn).await,
            Ok(Some(Ok(_notification))) => {}
            Ok(Some(Err(e))) => return Err(query_error(e)),
            Ok(None) => {
                return Err(unavailable(
                    Outage::Connection,
                    "the listening connection closed".to_owned(),
                ))
            }
        }
    }
}

/// The revision, read on the listening connection.
pub(super) async fn read_revision(conn: &mut AsyncPgConnection) -> Result<u64, StoreError> {
    decode_revision(
        revision_query()
            .get_result(conn)
            .await
            .map_err(query_error)?,
    )
}
