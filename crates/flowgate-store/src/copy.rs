//! Event batches written to PostgreSQL with `COPY ... FROM STDIN (FORMAT binary)`.
//!
//! `COPY` is PostgreSQL's bulk path: rows are read straight from the binary stream and the
//! table's rows stored a page at a time (one WAL record per heap page of rows, not one per
//! row), with no statement executor, array decoding or `UNNEST` materialisation per row. Index
//! entries (the primary key, `(app_id, occurred_at)`) are still inserted and WAL-logged one row
//! at a time, as on an insert. diesel-async cannot send it, so the store keeps a small pool of
//! plain tokio-postgres clients for it, made by the same [`PgConnector`] (the same TLS) as the
//! pool's connections, each with the statement prepared once. The columns and how each is
//! encoded come from the event column table ([`EVENT_COLUMNS`]).
//!
//! The stream is encoded whole before a client is taken, then sent in `CopyData` messages of
//! [`CHUNK`] bytes, so that neither tokio-postgres's write buffer nor the server (which reads
//! each message whole) holds the batch as one message: 10,000 events with 8 KiB of properties
//! each are about 100 MB.
//!
//! `COPY` has no `ON CONFLICT`: a batch holding an `event_id` already stored is refused whole
//! (the statement is atomic) with a unique violation, and `events.rs` then writes it again with
//! `INSERT ... ON CONFLICT DO NOTHING`.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use deadpool::managed::{Manager, Metrics, Object, Pool, PoolError, RecycleError, RecycleResult};
use diesel::ConnectionError;
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::{Outage, StoreError};
use futures_util::{Sink, SinkExt};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use tokio_postgres::error::{Severity, SqlState};

use crate::error::PgWriteError;
use crate::error::{database_error, unavailable, unstorable};
use crate::event_columns::{column_list, Take, EVENT_COLUMNS};
use crate::options::StoreOptions;
use crate::tls::PgConnector;

/// Fields per row of the stream: one per column of [`EVENT_COLUMNS`].
const FIELDS: i16 = {
    assert!(EVENT_COLUMNS.len() <= i16::MAX as usize);
    EVENT_COLUMNS.len() as i16
};

/// Bytes of the stream per `CopyData` message (the last one may be shorter).
const CHUNK: usize = 256 * 1024;

/// 2000-01-01T00:00:00Z, PostgreSQL's epoch for timestamps.
const PG_EPOCH: OffsetDateTime = time::macros::datetime!(2000-01-01 0:00 UTC);

/// A client with the statement prepared on its connection.
pub(crate) struct CopyClient {
    client: tokio_postgres::Client,
    statement: tokio_postgres::Statement,
}

/// Makes and checks [`CopyClient`]s for the pool.
pub(crate) struct CopyManager {
    connector: Arc<PgConnector>,
    connect_timeout: Duration,
}

impl Manager for CopyManager {
    type Type = CopyClient;
    type Error = ConnectionError;

    async fn create(&self) -> Result<CopyClient, ConnectionError> {
        let client = self.connector.connect_client(self.connect_timeout).await?;
        // Every column but `received_at`, which keeps its default (`now()`).
        let statement = client
            .prepare(&format!(
                "COPY analytics_events ({}) FROM STDIN (FORMAT binary)",
                column_list()
            ))
            .await
            .map_err(|e| ConnectionError::BadConnection(format!("cannot prepare COPY: {e}")))?;
        Ok(CopyClient { client, statement })
    }

    async fn recycle(&self, conn: &mut CopyClient, _: &Metrics) -> RecycleResult<ConnectionError> {
        // A client whose connection ended is replaced; a live one is reused as it is (the
        // next COPY reports a connection that broke since).
        if conn.client.is_closed() {
            return Err(RecycleError::message("connection closed"));
        }
        Ok(())
    }
}

/// The pool of `COPY` clients: made on first use, at most `max_size` (the writers).
pub(crate) type CopyPool = Pool<CopyManager>;

/// A pool of `max_size` `COPY` clients made by `connector`.
pub(crate) fn pool(
    connector: Arc<PgConnector>,
    max_size: usize,
    options: &StoreOptions,
) -> Result<CopyPool, StoreError> {
    let manager = CopyManager {
        connector,
        connect_timeout: options.connect_timeout,
    };
    crate::options::pool(manager, max_size, options)
}

/// Copies `rows` (no `event_id` twice) in one statement; how many rows were stored.
pub(crate) async fn copy_events(
    pool: &CopyPool,
    rows: &[&AnalyticsEvent],
) -> Result<usize, PgWriteError> {
    let data = encode(rows).map_err(PgWriteError::Store)?;
    let conn = pool.get().await.map_err(|e| {
        let reason = match e {
            PoolError::Timeout(_) => Outage::Timeout,
            _ => Outage::Connection,
        };
        PgWriteError::Store(unavailable(
            reason,
            format!("no database connection for COPY: {e}"),
        ))
    })?;
    let copy = CopyInProgress {
        conn: Some(conn),
        pool,
    };
    match run_copy(copy.client(), data).await {
        Ok(n) => {
            copy.keep();
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        }
        Err(e) => {
            if answered(&e) {
                copy.keep();
            } else {
                copy.discard();
            }
            if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                Err(PgWriteError::AlreadyStored)
            } else if e.as_db_error().is_some_and(|db| {
                crate::error::is_missing_partition(Some(db.code().code()), db.message())
            }) {
                Err(PgWriteError::NoPartition(copy_error(&e)))
            } else {
                Err(PgWriteError::Store(copy_error(&e)))
            }
        }
    }
}

/// One `COPY` of the encoded rows on `conn`: how many rows the server stored.
async fn run_copy(conn: &CopyClient, data: Bytes) -> Result<u64, tokio_postgres::Error> {
    let sink = conn.client.copy_in::<_, Bytes>(&conn.statement).await?;
    futures_util::pin_mut!(sink);
    feed_chunks(sink.as_mut(), data).await?;
    sink.finish().await
}

/// Feeds `data` to `sink` in pieces of [`CHUNK`] bytes (views of `data`, not copies). `feed`
/// waits for room in the sink (tokio-postgres's channel to its connection holds one message),
/// so at most a few chunks are buffered on their way to the server.
async fn feed_chunks<S: Sink<Bytes>>(
    mut sink: Pin<&mut S>,
    mut data: Bytes,
) -> Result<(), S::Error> {
    while !data.is_empty() {
        let chunk = data.split_to(CHUNK.min(data.len()));
        sink.feed(chunk).await?;
    }
    Ok(())
}

/// Whether the server answered the `COPY` with an error that leaves its session usable.
/// tokio-postgres ends every `COPY` with `Sync` (after `CopyDone`, or `CopyFail` when the sink
/// is dropped), so after an `ERROR` (bad data, a unique violation, a deadlock...) the
/// connection is idle and in step. A `FATAL` error ends the session, and anything without an
/// answer (I/O error, closed connection) may have left it anywhere.
fn answered(error: &tokio_postgres::Error) -> bool {
    error.as_db_error().is_some_and(|db| {
        !matches!(
            db.parsed_severity(),
            Some(Severity::Fatal | Severity::Panic)
        )
    })
}

/// A client during one `COPY`. It goes back to the pool when the server answered the `COPY`:
/// with the rows stored, or with an `ERROR` (see [`answered`]). Otherwise it leaves the pool
/// and the next write gets a new client:
/// - after an I/O error, a closed connection or a `FATAL` error ([`CopyInProgress::discard`]):
///   the connection is gone or in an unknown state;
/// - when the write is given up (the writer's timeout drops the future mid-`COPY`, and with it
///   this, still holding the client): see `Drop`.
struct CopyInProgress<'p> {
    conn: Option<Object<CopyManager>>,
    pool: &'p CopyPool,
}

impl CopyInProgress<'_> {
    fn client(&self) -> &CopyClient {
        match &self.conn {
            Some(conn) => conn,
            None => unreachable!("the client is only taken by `keep`, `discard` or `drop`"),
        }
    }

    /// The server answered the `COPY`: the client goes back to the pool.
    fn keep(mut self) {
        drop(self.conn.take());
    }

    /// The connection is gone or in an unknown state: the client leaves the pool.
    fn discard(mut self) {
        if let Some(conn) = self.conn.take() {
            drop(Object::take(conn));
        }
    }
}

impl Drop for CopyInProgress<'_> {
    /// The write was given up before the server answered. The `COPY` may still be running (its
    /// rows stored but not committed, waiting on a lock), or be complete but for the server's
    /// answer: tokio-postgres sends `CopyFail` when the stream is dropped before its end, but
    /// the server reads it only once it gets to it, and after `CopyDone` nothing stops it from
    /// committing. So the server is asked to cancel the statement (a cancel request on a
    /// connection of its own): the `COPY` then fails and is rolled back, unless it committed
    /// first, which the writer's retry meets as already stored (D7). The client leaves the
    /// pool: a client kept would queue the next write behind the aborted `COPY`. Its connection
    /// closes once the server has answered.
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let client = Object::take(conn);
        let token = client.client.cancel_token();
        let manager = self.pool.manager();
        let (connector, timeout) = (Arc::clone(&manager.connector), manager.connect_timeout);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { connector.cancel(&token, timeout).await });
        }
    }
}

/// A failed `COPY` as a [`StoreError`]: a database error by its SQLSTATE, classified as every
/// server error is (`error::database_error`), anything else (a connection lost) as unavailable.
fn copy_error(error: &tokio_postgres::Error) -> StoreError {
    match error.as_db_error() {
        Some(db) => database_error(
            db.code().code(),
            format!("COPY of events: {}", db.message()),
        ),
        None => unavailable(Outage::Connection, format!("COPY of events: {error}")),
    }
}

/// The binary `COPY` stream of `rows`: header, one tuple per row, trailer.
pub(crate) fn encode(rows: &[&AnalyticsEvent]) -> Result<Bytes, StoreError> {
    let mut out = BytesMut::with_capacity(19 + 2 + rows.len() * 320);
    out.put_slice(b"PGCOPY\n\xff\r\n\0");
    out.put_u32(0); // flags: no OIDs
    out.put_u32(0); // header extension length
    for &e in rows {
        out.put_i16(FIELDS);
        for column in &EVENT_COLUMNS {
            match column.take {
                Take::Uuid(take) => uuid(&mut out, take(e)),
                Take::Text(take) => text(&mut out, take(e))?,
                Take::Instant(take) => timestamp(&mut out, take(e))?,
                Take::Json(take) => jsonb(&mut out, take(e))?,
            }
        }
    }
    out.put_i16(-1);
    Ok(out.freeze())
}

fn field_len(len: usize) -> Result<i32, StoreError> {
    i32::try_from(len)
        .map_err(|_| unstorable(format!("an event field of {len} bytes is too large")))
}

fn uuid(out: &mut BytesMut, id: Option<uuid::Uuid>) {
    match id {
        Some(id) => {
            out.put_i32(16);
            out.put_slice(id.as_bytes());
        }
        None => out.put_i32(-1),
    }
}

fn text(out: &mut BytesMut, value: Option<&str>) -> Result<(), StoreError> {
    match value {
        Some(value) => {
            out.put_i32(field_len(value.len())?);
            out.put_slice(value.as_bytes());
        }
        None => out.put_i32(-1),
    }
    Ok(())
}

/// Microseconds since 2000-01-01 UTC, truncated as diesel's timestamptz binding does.
fn timestamp(out: &mut BytesMut, at: OffsetDateTime) -> Result<(), StoreError> {
    let micros = i64::try_from((at - PG_EPOCH).whole_microseconds())
        .map_err(|_| unstorable(format!("timestamp {at} out of range")))?;
    out.put_i32(8);
    out.put_i64(micros);
    Ok(())
}

/// `jsonb`'s binary form: a version byte (1), then the JSON text.
fn jsonb(out: &mut BytesMut, payload: &Map<String, Value>) -> Result<(), StoreError> {
    let at = out.len();
    out.put_i32(0); // the length, written below
    out.put_u8(1);
    serde_json::to_writer((&mut *out).writer(), payload)
        .map_err(|e| unstorable(format!("an event payload does not serialise: {e}")))?;
    let len = field_len(out.len() - at - 4)?;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowgate_domain::events::{EventSource, EventType, NoFlowReason};
    use flowgate_domain::ids::{AppId, EventId, FlowId, FlowVersionId};
    use flowgate_domain::Platform;

    fn event() -> AnalyticsEvent {
        AnalyticsEvent::new(
            EventId::from_uuid(uuid::Uuid::from_u128(0x0102)),
            EventSource::Server,
            EventType::ResolveNoFlow,
            AppId::from_uuid(uuid::Uuid::from_u128(3)),
            "u",
            "s",
            Platform::Ios,
            PG_EPOCH + time::Duration::microseconds(1_500_001),
        )
        .with_placement_key(Some("onboarding".into()))
        .with_reason(Some(NoFlowReason::Holdout))
    }

    /// Reads one field: its bytes, or `None` for NULL.
    fn field<'a>(data: &mut &'a [u8]) -> Option<&'a [u8]> {
        let len = i32::from_be_bytes(data[..4].try_into().unwrap());
        *data = &data[4..];
        if len < 0 {
            return None;
        }
        let (value, rest) = data.split_at(len as usize);
        *data = rest;
        Some(value)
    }

    #[test]
    fn the_stream_is_binary_copy_of_every_column() {
        let mut second = event();
        second.flow_id = Some(FlowId::from_uuid(uuid::Uuid::from_u128(4)));
        second.flow_version_id = Some(FlowVersionId::from_uuid(uuid::Uuid::from_u128(5)));
        second.source = EventSource::Sdk;
        second.event_type = EventType::ScreenView;
        second.reason = None;
        second.sdk_version = Some("ios-1.2".into());
        second
            .payload
            .insert("screen_id".into(), serde_json::json!("été"));
        let data = encode(&[&event(), &second]).unwrap();

        let mut rest: &[u8] = &data;
        assert_eq!(&rest[..11], b"PGCOPY\n\xff\r\n\0");
        assert_eq!(&rest[11..19], &[0; 8]);
        rest = &rest[19..];
        let mut rows = Vec::new();
        for _ in 0..2 {
            assert_eq!(i16::from_be_bytes([rest[0], rest[1]]), FIELDS);
            rest = &rest[2..];
            rows.push((0..FIELDS).map(|_| field(&mut rest)).collect::<Vec<_>>());
        }
        assert_eq!(
            rest,
            &(-1i16).to_be_bytes(),
            "the trailer, and nothing after it"
        );

        let first = &rows[0];
        assert_eq!(
            first[0],
            Some(&uuid::Uuid::from_u128(0x0102).as_bytes()[..])
        );
        assert_eq!(first[1], Some(&b"server"[..]));
        assert_eq!(first[2], Some(&b"resolve_no_flow"[..]));
        assert_eq!(first[4], None, "flow_id");
        assert_eq!(first[6], Some(&b"onboarding"[..]));
        assert_eq!(first[9], Some(&b"ios"[..]));
        assert_eq!(
            first[10],
            Some(&1_500_001i64.to_be_bytes()[..]),
            "µs since 2000"
        );
        assert_eq!(first[11], None, "sdk_version");
        assert_eq!(first[15], Some(&b"holdout"[..]));
        assert_eq!(first[16], Some(&b"\x01{}"[..]), "jsonb version 1");
        let second = &rows[1];
        assert_eq!(second[4], Some(&uuid::Uuid::from_u128(4).as_bytes()[..]));
        assert_eq!(second[11], Some(&b"ios-1.2"[..]));
        assert_eq!(second[15], None, "reason");
        assert_eq!(second[16], Some("\u{1}{\"screen_id\":\"été\"}".as_bytes()));
    }

    #[test]
    fn the_stream_goes_in_chunks_of_256_kib() {
        use futures_util::FutureExt;
        let data: Bytes = (0..2 * CHUNK + 10)
            .map(|i| i as u8)
            .collect::<Vec<_>>()
            .into();
        let mut sent: Vec<Bytes> = Vec::new();
        feed_chunks(Pin::new(&mut sent), data.clone())
            .now_or_never()
            .expect("a Vec is always ready")
            .unwrap();
        assert_eq!(
            sent.iter().map(Bytes::len).collect::<Vec<_>>(),
            [CHUNK, CHUNK, 10]
        );
        assert_eq!(sent.concat(), data, "the stream, in order, once");
        // A stream of one chunk or less goes as one message.
        sent.clear();
        feed_chunks(Pin::new(&mut sent), data.slice(..100))
            .now_or_never()
            .expect("ready")
            .unwrap();
        assert_eq!(sent, [data.slice(..100)]);
    }

    #[test]
    fn timestamps_before_2000_and_truncated_microseconds() {
        let mut e = event();
        e.occurred_at = PG_EPOCH - time::Duration::nanoseconds(1_999);
        let data = encode(&[&e]).unwrap();
        let mut rest: &[u8] = &data[21..];
        let fields: Vec<_> = (0..FIELDS).map(|_| field(&mut rest)).collect();
        assert_eq!(
            fields[10],
            Some(&(-1i64).to_be_bytes()[..]),
            "toward zero, as diesel"
        );
    }
}
