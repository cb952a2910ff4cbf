//! Event batches written to PostgreSQL with `COPY ... FROM STDIN (FORMAT binary)`.
//!
//! `COPY` is PostgreSQL's bulk path: rows are read straight from the binary stream and stored a
//! page at a time (one WAL record per page of rows, not one per row), with no statement
//! executor, array decoding or `UNNEST` materialisation per row. diesel-async cannot send it
//! (TECH-NOTES), so the store keeps a small pool of plain tokio-postgres clients for it, made
//! by the same [`PgTarget`] (the same TLS) as the pool's connections, each with the statement
//! prepared once.
//!
//! `COPY` has no `ON CONFLICT`: a batch holding an `event_id` already stored is refused whole
//! (the statement is atomic) with a unique violation, and `events.rs` then writes it again with
//! `INSERT ... ON CONFLICT DO NOTHING`.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use deadpool::managed::{Manager, Metrics, Object, Pool, RecycleError, RecycleResult};
use diesel::ConnectionError;
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::StoreError;
use futures_util::SinkExt;
use time::OffsetDateTime;
use tokio_postgres::error::SqlState;

use crate::tls::PgTarget;

/// The statement: every column but `received_at`, which keeps its default (`now()`).
const COPY_EVENTS: &str = "COPY analytics_events (event_id, source, event_type, app_id, \
     flow_id, flow_version_id, placement_key, user_id, session_id, device_platform, \
     occurred_at, sdk_version, experiment_id, variant_id, variant_name, reason, payload) \
     FROM STDIN (FORMAT binary)";

/// Columns per row, in `COPY_EVENTS`'s order.
const COLUMNS: i16 = 17;

/// 2000-01-01T00:00:00Z, PostgreSQL's epoch for timestamps.
const PG_EPOCH: OffsetDateTime = time::macros::datetime!(2000-01-01 0:00 UTC);

/// A client with the statement prepared on its connection.
pub(crate) struct CopyClient {
    client: tokio_postgres::Client,
    statement: tokio_postgres::Statement,
}

/// Makes and checks [`CopyClient`]s for the pool.
pub(crate) struct CopyManager {
    target: Arc<PgTarget>,
    connect_timeout: Duration,
}

impl Manager for CopyManager {
    type Type = CopyClient;
    type Error = ConnectionError;

    async fn create(&self) -> Result<CopyClient, ConnectionError> {
        let client = self.target.connect_client(self.connect_timeout).await?;
        let statement = client
            .prepare(COPY_EVENTS)
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

/// A pool of `COPY` clients to `target`.
pub(crate) fn pool(
    target: Arc<PgTarget>,
    max_size: usize,
    connect_timeout: Duration,
    acquire_timeout: Duration,
) -> Result<CopyPool, StoreError> {
    Pool::builder(CopyManager {
        target,
        connect_timeout,
    })
    .max_size(max_size)
    .wait_timeout(Some(acquire_timeout))
    .create_timeout(Some(connect_timeout))
    .recycle_timeout(Some(connect_timeout))
    .runtime(deadpool::Runtime::Tokio1)
    .build()
    .map_err(|e| StoreError::Other(format!("cannot build the COPY connection pool: {e}")))
}

/// Why a `COPY` of a batch failed.
#[derive(Debug)]
pub(crate) enum CopyError {
    /// An `event_id` of the batch is already stored: nothing of it was stored.
    AlreadyStored,
    /// Anything else, as the store reports it.
    Store(StoreError),
}

/// Copies `rows` (no `event_id` twice) in one statement; how many rows were stored.
pub(crate) async fn copy_events(
    pool: &CopyPool,
    rows: &[&AnalyticsEvent],
) -> Result<usize, CopyError> {
    let data = encode(rows).map_err(CopyError::Store)?;
    let conn = pool.get().await.map_err(|e| {
        CopyError::Store(StoreError::Unavailable(format!(
            "no database connection for COPY: {e}"
        )))
    })?;
    let mut held = Held(Some(conn));
    match run_copy(held.client(), data).await {
        Ok(n) => {
            held.keep();
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        }
        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            // The server refused the rows; the connection is fine.
            held.keep();
            Err(CopyError::AlreadyStored)
        }
        Err(e) => Err(CopyError::Store(copy_error(&e))),
    }
}

/// One `COPY` of the encoded rows on `conn`: how many rows the server stored.
async fn run_copy(conn: &CopyClient, data: Bytes) -> Result<u64, tokio_postgres::Error> {
    let sink = conn.client.copy_in::<_, Bytes>(&conn.statement).await?;
    futures_util::pin_mut!(sink);
    sink.send(data).await?;
    sink.finish().await
}

/// A client during one `COPY`. Unless the `COPY` ended in an answer from the server, the
/// client leaves the pool when this is dropped: after an error, or when the write was given up
/// (the writer's timeout drops the future; tokio-postgres then aborts the `COPY`), its
/// connection may hang or be gone, and the next write gets a new one.
struct Held(Option<Object<CopyManager>>);

impl Held {
    fn client(&self) -> &CopyClient {
        match &self.0 {
            Some(conn) => conn,
            None => unreachable!("the client is only taken by `keep` or `drop`"),
        }
    }

    /// The `COPY` ended with an answer: the client goes back to the pool.
    fn keep(&mut self) {
        drop(self.0.take());
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            drop(Object::take(conn));
        }
    }
}

/// A failed `COPY` as a [`StoreError`], with `error.rs`'s categories: a database error by its
/// class, anything else (a connection lost, a timeout) as unavailable.
fn copy_error(error: &tokio_postgres::Error) -> StoreError {
    let Some(db) = error.as_db_error() else {
        return StoreError::Unavailable(format!("COPY of events: {error}"));
    };
    let detail = format!("COPY of events: {}", db.message());
    let code = db.code();
    if code.code().starts_with("23") {
        // Integrity constraint violations (not null, check, foreign key...).
        StoreError::Conflict(detail)
    } else if code.code().starts_with("08")
        || code.code().starts_with("57")
        || *code == SqlState::T_R_SERIALIZATION_FAILURE
    {
        // Connection exceptions, operator intervention (shutdown, cancel): transient.
        StoreError::Unavailable(detail)
    } else {
        StoreError::Other(detail)
    }
}

/// The binary `COPY` stream of `rows`: header, one tuple per row, trailer.
pub(crate) fn encode(rows: &[&AnalyticsEvent]) -> Result<Bytes, StoreError> {
    let mut out = BytesMut::with_capacity(19 + 2 + rows.len() * 320);
    out.put_slice(b"PGCOPY\n\xff\r\n\0");
    out.put_u32(0); // flags: no OIDs
    out.put_u32(0); // header extension length
    for e in rows {
        out.put_i16(COLUMNS);
        uuid(&mut out, e.event_id.0);
        text(&mut out, Some(e.source.as_str()))?;
        text(&mut out, Some(e.event_type.as_str()))?;
        uuid(&mut out, e.app_id.0);
        optional_uuid(&mut out, e.flow_id.map(|f| f.0));
        optional_uuid(&mut out, e.flow_version_id.map(|v| v.0));
        text(&mut out, e.placement_key.as_deref())?;
        text(&mut out, Some(&e.user_id))?;
        text(&mut out, Some(&e.session_id))?;
        text(&mut out, Some(e.device_platform.as_str()))?;
        timestamp(&mut out, e.occurred_at)?;
        text(&mut out, e.sdk_version.as_deref())?;
        text(&mut out, e.experiment_id.as_deref())?;
        text(&mut out, e.variant_id.as_deref())?;
        text(&mut out, e.variant_name.as_deref())?;
        text(&mut out, e.reason.map(|r| r.as_str()))?;
        jsonb(&mut out, &e.payload)?;
    }
    out.put_i16(-1);
    Ok(out.freeze())
}

fn field_len(len: usize) -> Result<i32, StoreError> {
    i32::try_from(len)
        .map_err(|_| StoreError::Other(format!("an event field of {len} bytes is too large")))
}

fn uuid(out: &mut BytesMut, id: uuid::Uuid) {
    out.put_i32(16);
    out.put_slice(id.as_bytes());
}

fn optional_uuid(out: &mut BytesMut, id: Option<uuid::Uuid>) {
    match id {
        Some(id) => uuid(out, id),
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
        .map_err(|_| StoreError::Other(format!("timestamp {at} out of range")))?;
    out.put_i32(8);
    out.put_i64(micros);
    Ok(())
}

/// `jsonb`'s binary form: a version byte (1), then the JSON text.
fn jsonb(
    out: &mut BytesMut,
    payload: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), StoreError> {
    let at = out.len();
    out.put_i32(0); // the length, written below
    out.put_u8(1);
    serde_json::to_writer((&mut *out).writer(), payload)
        .map_err(|e| StoreError::Other(format!("an event payload does not serialise: {e}")))?;
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
        AnalyticsEvent {
            event_id: EventId::from_uuid(uuid::Uuid::from_u128(0x0102)),
            source: EventSource::Server,
            event_type: EventType::ResolveNoFlow,
            app_id: AppId::from_uuid(uuid::Uuid::from_u128(3)),
            flow_id: None,
            flow_version_id: None,
            placement_key: Some("onboarding".into()),
            user_id: "u".into(),
            session_id: "s".into(),
            device_platform: Platform::Ios,
            occurred_at: PG_EPOCH + time::Duration::microseconds(1_500_001),
            sdk_version: None,
            experiment_id: None,
            variant_id: None,
            variant_name: None,
            reason: Some(NoFlowReason::Holdout),
            payload: serde_json::Map::new(),
        }
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
            assert_eq!(i16::from_be_bytes([rest[0], rest[1]]), COLUMNS);
            rest = &rest[2..];
            rows.push((0..COLUMNS).map(|_| field(&mut rest)).collect::<Vec<_>>());
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
    fn timestamps_before_2000_and_truncated_microseconds() {
        let mut e = event();
        e.occurred_at = PG_EPOCH - time::Duration::nanoseconds(1_999);
        let data = encode(&[&e]).unwrap();
        let mut rest: &[u8] = &data[21..];
        let fields: Vec<_> = (0..COLUMNS).map(|_| field(&mut rest)).collect();
        assert_eq!(
            fields[10],
            Some(&(-1i64).to_be_bytes()[..]),
            "toward zero, as diesel"
        );
    }
}
