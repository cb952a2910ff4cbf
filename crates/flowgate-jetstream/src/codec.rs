//! The message format on the stream, versioned so that other consumers (a warehouse loader)
//! can read it (D16) and so that two releases can share the stream during an upgrade (D26).
//!
//! A message holds the events of one write of the publishing sink, at most
//! [`MAX_EVENTS_PER_MESSAGE`] (the most one events request may carry) and at most the
//! server's payload limit:
//!
//! - header `Flowgate-Format: flowgate.events.v1+json` ([`FORMAT`]): the body is a JSON array
//!   of events, each an object with the stored event's fields (`event_id`, `source`,
//!   `event_type`, `app_id`, `flow_id`, `flow_version_id`, `placement_key`, `user_id`,
//!   `session_id`, `device_platform`, `occurred_at` (RFC 3339), `sdk_version`,
//!   `experiment_id`, `variant_id`, `variant_name`, `reason`, `payload`);
//! - header `Flowgate-Events`: how many events the body holds;
//! - header `Nats-Msg-Id`: the SHA-256 of the message's events' app ids and event ids (each
//!   event's 16 bytes of `app_id`, then its 16 of `event_id`), in hex. A message sent again
//!   (the publisher retries after a lost acknowledgement) has the same id, and the stream keeps
//!   it once within its duplicate window; a message with other events never shares it, nor one
//!   of another app whose events use the same ids (event ids are unique per app, D25).
//!
//! One message per write rather than one per event: publishing 100 events as one message took
//! a fraction of the time of 100 messages with their acknowledgements (`benches/shapes.rs`,
//! figures in docs/benchmarks.md), and the store's `event_id` keeps ingestion idempotent either
//! way.
//!
//! # Versions
//!
//! The `Flowgate-Format` header names the version. This release writes [`FORMAT`] and reads
//! every format of [`READS`] (D26); golden samples of each version are kept, never rewritten,
//! under `formats/flowgate.events+json/v<N>/` at the repository's root (listed in
//! `formats/MANIFEST.sha256`), and a test reads each with this reader.
//!
//! | Version | Changed | Written | Read |
//! |---|---|---|---|
//! | `flowgate.events.v1+json` | the first version: the headers and body above | yes | yes |
//!
//! Within a version the body may gain **optional** members of an event: that is not a new
//! version. A reader ignores members it does not know (a release reading what a newer one
//! wrote) and takes a missing optional member as absent (a newer release reading what an older
//! one wrote): `AnalyticsEvent`'s deserializer refuses no unknown member and gives every
//! optional one (`payload` included) a default. A new version is needed for anything a
//! reader of the previous version would misread or refuse: a required member, a member whose
//! type or meaning changes, a new value of an enumerated member (`source`, `event_type`,
//! `device_platform`, `reason`), another encoding. A new version is first added to
//! [`READS`] in one release and written ([`FORMAT`]) only in a later one, so that the previous
//! release, which may run beside it or be rolled back to, reads everything on the stream.
//!
//! A message whose format is not in [`READS`] is [`DecodeError::Unreadable`]: `flowgate
//! ingest` leaves it in the stream (handed back, not acknowledged) for a release that reads it
//! and counts it (`flowgate_ingest_unreadable_messages_total{format}`); a message without the
//! header, or whose body is not an array of events in a format it reads, is
//! [`DecodeError::NoFormat`] or [`DecodeError::Body`], which no release can read: a dead
//! letter (D17).

use async_nats::HeaderMap;
use bytes::Bytes;
use flowgate_domain::events::AnalyticsEvent;
use sha2::{Digest, Sha256};

/// The header naming a message's format.
pub const FORMAT_HEADER: &str = "Flowgate-Format";
/// The format this release writes: a JSON array of events.
pub const FORMAT: &str = "flowgate.events.v1+json";
/// Every format this release reads, [`FORMAT`] included (see "Versions" above).
pub const READS: &[&str] = &[FORMAT];
/// The header holding the number of events in a message.
pub const COUNT_HEADER: &str = "Flowgate-Events";
/// Most events per message: the most one events request may carry (D7).
pub const MAX_EVENTS_PER_MESSAGE: usize = 100;

/// One message to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `Nats-Msg-Id`: SHA-256 of the events' app and event ids, hex.
    pub id: String,
    /// The JSON array.
    pub payload: Bytes,
    /// Events in it.
    pub events: usize,
}

impl Message {
    /// The headers to publish it with (the id goes with the publish itself).
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(FORMAT_HEADER, FORMAT);
        headers.insert(COUNT_HEADER, self.events.to_string().as_str());
        headers
    }
}

/// Why events could not be put in messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// One event alone is larger than a message may be.
    #[error("event {event_id} takes {size} bytes as JSON, more than a NATS message may hold ({limit} bytes)")]
    TooLarge {
        /// The event.
        event_id: String,
        /// Its encoded size.
        size: usize,
        /// The most a message body may take.
        limit: usize,
    },
    /// The JSON encoder failed (not expected for the event model).
    #[error("cannot encode event {event_id}: {message}")]
    Json {
        /// The event.
        event_id: String,
        /// The encoder's message.
        message: String,
    },
}

/// Splits `events` into messages of at most [`MAX_EVENTS_PER_MESSAGE`] events and
/// `max_bytes` bytes of body, in order.
pub fn encode(events: &[AnalyticsEvent], max_bytes: usize) -> Result<Vec<Message>, EncodeError> {
    let mut messages = Vec::with_capacity(events.len().div_ceil(MAX_EVENTS_PER_MESSAGE));
    let mut body: Vec<u8> = Vec::new();
    let mut ids = Sha256::new();
    let mut count = 0;
    let mut one = Vec::with_capacity(512);
    for event in events {
        one.clear();
        serde_json::to_writer(&mut one, event).map_err(|e| EncodeError::Json {
            event_id: event.event_id.to_string(),
            message: e.to_string(),
        })?;
        // `[` + the events + `,` between them + `]`.
        if one.len() + 2 > max_bytes {
            return Err(EncodeError::TooLarge {
                event_id: event.event_id.to_string(),
                size: one.len(),
                limit: max_bytes,
            });
        }
        if count == MAX_EVENTS_PER_MESSAGE || body.len() + one.len() + 2 > max_bytes {
            messages.push(finish(&mut body, &mut ids, &mut count));
        }
        body.push(if count == 0 { b'[' } else { b',' });
        body.extend_from_slice(&one);
        ids.update(event.app_id.as_uuid().as_bytes());
        ids.update(event.event_id.as_uuid().as_bytes());
        count += 1;
    }
    if count > 0 {
        messages.push(finish(&mut body, &mut ids, &mut count));
    }
    Ok(messages)
}

fn finish(body: &mut Vec<u8>, ids: &mut Sha256, count: &mut usize) -> Message {
    body.push(b']');
    let digest = std::mem::take(ids).finalize();
    let id = digest.iter().map(|b| format!("{b:02x}")).collect();
    let events = std::mem::take(count);
    Message {
        id,
        payload: Bytes::from(std::mem::take(body)),
        events,
    }
}

/// Why a message could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A format this release does not read (a later release's, D26): the message must wait
    /// for a release that reads it, never be set aside.
    #[error("message format {0:?} is not one this release reads ({reads})", reads = READS.join(", "))]
    Unreadable(String),
    /// No `Flowgate-Format` header: no release wrote it, none can read it.
    #[error("no {FORMAT_HEADER} header: not a flowgate message")]
    NoFormat,
    /// The body is not an array of events in the format its header names.
    #[error("the body is not a JSON array of events in {format}: {error}")]
    Body {
        /// The format the header named.
        format: String,
        /// The parser's message.
        error: String,
    },
}

impl DecodeError {
    /// True when a later release may read the message: it must stay in the stream.
    pub fn is_unreadable_format(&self) -> bool {
        matches!(self, DecodeError::Unreadable(_))
    }
}

/// Whether this release reads messages in `format` (one of [`READS`]).
pub fn reads(format: &str) -> bool {
    READS.contains(&format)
}

/// The events of a message, given its `Flowgate-Format` header's value.
pub fn decode(format: Option<&str>, payload: &[u8]) -> Result<Vec<AnalyticsEvent>, DecodeError> {
    let format = format.ok_or(DecodeError::NoFormat)?;
    if !reads(format) {
        return Err(DecodeError::Unreadable(format.to_owned()));
    }
    // Every version read so far (v1) is the same JSON array: one parser. A later version with
    // another body gets its own arm here.
    serde_json::from_slice(payload).map_err(|e| DecodeError::Body {
        format: format.to_owned(),
        error: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use flowgate_domain::events::{EventSource, EventType, NoFlowReason};
    use flowgate_domain::ids::{AppId, EventId, FlowId, FlowVersionId};
    use flowgate_domain::Platform;
    use time::macros::datetime;

    use super::*;

    fn event(n: u128) -> AnalyticsEvent {
        let mut payload = serde_json::Map::new();
        payload.insert("screen_index".to_owned(), serde_json::json!(n as u64));
        payload.insert(
            "properties".to_owned(),
            serde_json::json!({"big": 12345678901234567890u64, "ratio": 0.1 + 0.2}),
        );
        AnalyticsEvent::new(
            EventId::from_uuid(uuid::Uuid::from_u128(n)),
            EventSource::Sdk,
            EventType::ScreenView,
            AppId::from_uuid(uuid::Uuid::from_u128(1)),
            format!("user-{n}"),
            "s",
            Platform::Android,
            datetime!(2026-11-24 10:00:00.123456789 +02:00),
        )
        .with_flow_id(Some(FlowId::from_uuid(uuid::Uuid::from_u128(2))))
        .with_flow_version_id(Some(FlowVersionId::from_uuid(uuid::Uuid::from_u128(3))))
        .with_placement_key(Some("onboarding".to_owned()))
        .with_sdk_version(Some("1.2.3".to_owned()))
        .with_payload(payload)
    }

    #[test]
    fn events_round_trip_exactly() {
        let mut server = event(9);
        server.source = EventSource::Server;
        server.event_type = EventType::ResolveNoFlow;
        server.reason = Some(NoFlowReason::Holdout);
        server.experiment_id = Some("e".to_owned());
        let events = vec![event(1), server, event(2)];
        let messages = encode(&events, 1 << 20).unwrap();
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].events, 3);
        let back = decode(Some(FORMAT), &messages[0].payload).unwrap();
        assert_eq!(back, events);
    }

    #[test]
    fn messages_hold_at_most_a_request_and_fit_the_payload_limit() {
        let events: Vec<_> = (0..250).map(event).collect();
        let sizes: Vec<usize> = encode(&events, 1 << 20)
            .unwrap()
            .iter()
            .map(|m| m.events)
            .collect();
        assert_eq!(sizes, vec![100, 100, 50]);
        // A small limit: messages close before they would pass it, and together hold every
        // event once, in order.
        let limit = 2_000;
        let messages = encode(&events, limit).unwrap();
        assert!(messages.iter().all(|m| m.payload.len() <= limit));
        let back: Vec<AnalyticsEvent> = messages
            .iter()
            .flat_map(|m| decode(Some(FORMAT), &m.payload).unwrap())
            .collect();
        assert_eq!(back, events);
        let total: usize = messages.iter().map(|m| m.events).sum();
        assert_eq!(total, 250);
    }

    #[test]
    fn ids_follow_the_events_only() {
        let a: Vec<_> = (0..10).map(event).collect();
        let id = |events: &[AnalyticsEvent]| encode(events, 1 << 20).unwrap()[0].id.clone();
        assert_eq!(id(&a), id(&a), "the same events: the same id (a retry)");
        assert_eq!(id(&a).len(), 64);
        let mut other_fields = a.clone();
        other_fields[0].user_id = "changed".to_owned();
        assert_eq!(id(&a), id(&other_fields), "the id is the event ids'");
        let mut other_app = a.clone();
        other_app[0].app_id = AppId::from_uuid(uuid::Uuid::from_u128(0xB));
        assert_ne!(
            id(&a),
            id(&other_app),
            "the same ids in another app: another message"
        );
        assert_ne!(id(&a), id(&a[..9]), "fewer events: another message");
        let mut reordered = a.clone();
        reordered.swap(0, 1);
        assert_ne!(id(&a), id(&reordered));
    }

    #[test]
    fn an_event_larger_than_a_message_is_refused() {
        let mut big = event(1);
        big.payload.insert(
            "properties".to_owned(),
            serde_json::json!("x".repeat(5_000)),
        );
        let error = encode(&[event(0), big], 4_000).unwrap_err();
        assert!(
            matches!(error, EncodeError::TooLarge { limit: 4_000, .. }),
            "{error}"
        );
        assert!(error
            .to_string()
            .contains("00000000-0000-0000-0000-000000000001"));
    }

    #[test]
    fn unknown_formats_and_bodies_are_refused_with_what_was_seen() {
        let e = decode(Some("flowgate.events.v9+avro"), b"[]").unwrap_err();
        assert_eq!(
            e.to_string(),
            "message format \"flowgate.events.v9+avro\" is not one this release reads (flowgate.events.v1+json)"
        );
        assert!(e.is_unreadable_format(), "a later release's: kept");
        let none = decode(None, b"[]").unwrap_err();
        assert_eq!(none, DecodeError::NoFormat);
        assert!(!none.is_unreadable_format(), "no release reads it");
        let body = decode(Some(FORMAT), b"{\"not\": \"an array\"}").unwrap_err();
        assert!(matches!(body, DecodeError::Body { .. }), "{body}");
        assert!(!body.is_unreadable_format(), "corrupt in a known format");
        assert_eq!(decode(Some(FORMAT), b"[]").unwrap(), vec![]);
    }

    #[test]
    fn every_readable_format_is_read_and_the_written_one_is_among_them() {
        assert!(READS.contains(&FORMAT));
        for format in READS {
            assert!(reads(format));
            assert_eq!(decode(Some(format), b"[]").unwrap(), vec![]);
        }
    }

    #[test]
    fn headers_name_the_format_and_the_count() {
        let m = &encode(&[event(1), event(2)], 1 << 20).unwrap()[0];
        let h = m.headers();
        assert_eq!(h.get(FORMAT_HEADER).map(|v| v.as_str()), Some(FORMAT));
        assert_eq!(h.get(COUNT_HEADER).map(|v| v.as_str()), Some("2"));
    }
}
