//! [`Publisher`]: the stream as an [`EventStore`] (D16). `serve` runs its analytics sink over
//! it: the sink's writers batch events as they do for a database, a batch is "stored" once
//! the stream acknowledged every message of it, and the sink's acknowledgements (D15),
//! retries, drain and metrics apply unchanged.

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self};
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::{AppendOutcome, BoxFuture, EventStore, Outage, StoreError};

use crate::codec::{encode, EncodeError};
use crate::setup::Bus;

/// Bytes a message's headers may take (`Nats-Msg-Id`, format, count), kept free of the
/// server's payload limit.
const HEADER_ROOM: usize = 512;

/// Publishes batches of events to the stream; see the module documentation.
#[derive(Clone, Debug)]
pub struct Publisher {
    js: jetstream::Context,
    client: async_nats::Client,
    subject: String,
}

impl Publisher {
    /// A publisher on `bus`'s stream subject.
    pub fn new(bus: &Bus) -> Self {
        Self {
            js: bus.context().clone(),
            client: bus.client().clone(),
            subject: bus.config().subject.clone(),
        }
    }
}

fn publish_error(error: &jetstream::context::PublishError) -> StoreError {
    match error.kind() {
        // Not the message's fault: no stream answered for the subject, because its replicas
        // are electing a leader (seconds) or it was deleted (run `flowgate migrate`). The batch
        // is held and retried; requests wait or get 503.
        PublishErrorKind::StreamNotFound => StoreError::Unavailable {
            reason: Outage::Connection,
            detail: format!(
                "no stream answered for the subject (a leader election, or the stream is missing): {error}"
            ),
        },
        PublishErrorKind::MaxPayloadExceeded => {
            StoreError::Unstorable {
                detail: format!("message too large for NATS: {error}"),
            }
        }
        _ => StoreError::Unavailable {
            reason: Outage::Connection,
            detail: format!("publish to JetStream failed: {error}"),
        },
    }
}

impl EventStore for Publisher {
    /// Publishes the batch as messages of up to 100 events (`codec`) and resolves once the
    /// stream acknowledged all of them. A message the stream already had (same `Nats-Msg-Id`
    /// within its duplicate window: a retry) counts its events as duplicates. Any failure is
    /// transient (the sink retries the whole batch; the stream and the store keep each event
    /// once), except an event too large for a message, which is refused for good and becomes
    /// a dead letter (D17).
    fn append_events<'a>(
        &'a self,
        events: &'a [AnalyticsEvent],
    ) -> BoxFuture<'a, Result<AppendOutcome, StoreError>> {
        Box::pin(async move {
            let max_bytes = self.client.max_payload().saturating_sub(HEADER_ROOM);
            let messages = encode(events, max_bytes).map_err(|e| match e {
                EncodeError::TooLarge { .. } | EncodeError::Json { .. } => StoreError::Unstorable {
                    detail: e.to_string(),
                },
            })?;
            // Every message is sent before any acknowledgement is awaited: one round trip for
            // the batch, not one per message.
            let mut acks = Vec::with_capacity(messages.len());
            for message in &messages {
                let publish = PublishMessage::build()
                    .payload(message.payload.clone())
                    .headers(message.headers())
                    .message_id(&message.id);
                let ack = self
                    .js
                    .send_publish(self.subject.clone(), publish)
                    .await
                    .map_err(|e| publish_error(&e))?;
                acks.push((ack, message.events));
            }
            let mut outcome = AppendOutcome::default();
            for (ack, events) in acks {
                let ack = ack.await.map_err(|e| publish_error(&e))?;
                if ack.duplicate {
                    outcome.duplicates += events;
                } else {
                    outcome.inserted += events;
                }
            }
            Ok(outcome)
        })
    }
}
