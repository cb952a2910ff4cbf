use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::stream::{self, StorageType};
use flowgate_domain::ports::EventStore;
use flowgate_jetstream::codec::{FORMAT, FORMAT_HEADER};
use flowgate_jetstream::{Bus, Ensured, Ingest, IngestConfig, Publisher, SetupError};
use flowgate_testkit::NatsServer;
use tokio::sync::watch;

use crate::support::*;

fn ingest_config() -> IngestConfig {
    IngestConfig {
        loops: 2,
        messages_per_write: 10,
        write_timeout: Duration::from_secs(5),
        fetch_wait: Duration::from_millis(200),
        retry_base: Duration::from_millis(50),
        retry_max: Duration::from_millis(300),
        unreadable_retry: Duration::from_millis(300),
    }
}

/// Runs ingest from `bus` into `store` until the returned sender says stop.
fn start_ingest(
    bus: &Bus,
    store: &Arc<FaultStore>,
) -> (
    watch::Sender<bool>,
    tokio::task::JoinHandle<()>,
    Arc<flowgate_jetstream::IngestStats>,
) {
    let (stop, stopped) = watch::channel(false);
    let ingest = Ingest::new(bus.clone(), store.clone(), store.clone(), ingest_config());
    let stats = ingest.stats();
    let task = tokio::spawn(async move { ingest.run(stopped).await.unwrap() });
    (stop, task, stats)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_creates_the_stream_and_consumer_once_and_checks_pass_after() {
    let server = NatsServer::start();
    let bus = Bus::connect(&config(&server.url()), "test").await.unwrap();
    let missing = bus.check().await.unwrap_err();
    assert_eq!(
        missing.to_string(),
        "stream FLOWGATE_EVENTS does not exist: run `flowgate migrate` with events.sink = \"jetstream\" to create it"
    );
    assert_eq!(
        bus.ensure().await.unwrap(),
        (Ensured::Created, Ensured::Created)
    );
    assert_eq!(
        bus.ensure().await.unwrap(),
        (Ensured::Unchanged, Ensured::Unchanged)
    );
    bus.check().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_ingest_refuse_a_misconfigured_stream() {
    let server = NatsServer::start();
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    // A stream in memory: a NATS restart would lose acknowledged events.
    js.create_stream(stream::Config {
        name: "FLOWGATE_EVENTS".to_owned(),
        subjects: vec!["flowgate.events".to_owned()],
        storage: StorageType::Memory,
        ..stream::Config::default()
    })
    .await
    .unwrap();
    let bus = Bus::connect(&config(&server.url()), "test").await.unwrap();
    let e = bus.check().await.unwrap_err();
    assert!(matches!(e, SetupError::Misconfigured(_)), "{e}");
    assert!(e.to_string().contains("in memory"), "{e}");
    assert!(bus.ensure().await.is_err(), "migrate does not replace it");
    // The right stream without the consumer: serve would publish into nothing.
    js.delete_stream("FLOWGATE_EVENTS").await.unwrap();
    js.create_stream(stream::Config {
        name: "FLOWGATE_EVENTS".to_owned(),
        subjects: vec!["other.subject".to_owned()],
        ..stream::Config::default()
    })
    .await
    .unwrap();
    let e = bus.check().await.unwrap_err();
    assert!(e.to_string().contains("`flowgate.events`"), "{e}");
    // migrate brings the subject in line and adds the consumer.
    assert_eq!(
        bus.ensure().await.unwrap(),
        (Ensured::Updated, Ensured::Created)
    );
    bus.check().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_stops_delivering_is_refused_and_migrate_restores_it() {
    let (_server, bus) = ready_bus().await;
    let js = async_nats::jetstream::new(bus.client().clone());
    let stream = js.get_stream("FLOWGATE_EVENTS").await.unwrap();
    // An operator limits deliveries: a message of a later release's format would be stranded.
    let info = stream.consumer_info("flowgate-ingest").await.unwrap();
    let limited = info.config.clone();
    stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            durable_name: limited.durable_name.clone(),
            description: limited.description.clone(),
            ack_policy: limited.ack_policy,
            ack_wait: limited.ack_wait,
            max_deliver: 5,
            max_ack_pending: limited.max_ack_pending,
            ..Default::default()
        })
        .await
        .unwrap();
    let e = bus.check().await.unwrap_err();
    assert!(matches!(e, SetupError::Misconfigured(_)), "{e}");
    assert!(
        e.to_string()
            .contains("stops delivering a message after 5 deliveries"),
        "{e}"
    );
    assert_eq!(
        bus.ensure().await.unwrap(),
        (Ensured::Unchanged, Ensured::Updated)
    );
    bus.check().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_unreachable_is_a_clear_error_in_time() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let e = Bus::connect(
        &config(&format!("nats://flowgate:secret@127.0.0.1:{port}")),
        "test",
    )
    .await
    .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(e, SetupError::Unreachable { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot reach NATS at nats://flowgate:***@127.0.0.1:{port}"
        )),
        "{text}"
    );
    assert!(!text.contains("secret"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_events_are_stored_once_and_acknowledged() {
    let (_server, bus) = ready_bus().await;
    let publisher = Publisher::new(&bus);
    let batch = events(250);
    let outcome = publisher.append_events(&batch).await.unwrap();
    assert_eq!((outcome.inserted, outcome.duplicates), (250, 0));
    // The same batch again (a retry after a lost acknowledgement): the stream keeps it once.
    let again = publisher.append_events(&batch).await.unwrap();
    assert_eq!((again.inserted, again.duplicates), (0, 250));
    assert_eq!(
        bus.lag().await.unwrap().pending,
        3,
        "250 events in 3 messages"
    );

    let store = FaultStore::new();
    let (stop, task, stats) = start_ingest(&bus, &store);
    assert!(eventually(Duration::from_secs(10), || store.ids().len() == 250).await);
    assert!(
        eventually(Duration::from_secs(5), || stats
            .messages_acknowledged
            .load(Ordering::Relaxed)
            == 3)
        .await
    );
    let stored: HashSet<_> = store.ids().into_iter().collect();
    assert_eq!(stored, batch.iter().map(|e| e.event_id).collect());
    assert_eq!(
        store.inner.events(),
        batch,
        "every field as published, in order"
    );
    // Acknowledged: nothing is pending or delivered again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let lag = bus.lag().await.unwrap();
    assert_eq!((lag.pending, lag.unacknowledged), (0, 0));
    assert_eq!(store.ids().len(), 250);
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_delivered_twice_is_stored_once() {
    let (_server, bus) = ready_bus().await;
    let publisher = Publisher::new(&bus);
    let batch = events(40);
    publisher.append_events(&batch).await.unwrap();
    // Ingest stores the batch but its acknowledgements are lost: the first process dies
    // after the commit (the messages were received and not acknowledged).
    let consumer_stream = async_nats::jetstream::new(bus.client().clone())
        .get_stream("FLOWGATE_EVENTS")
        .await
        .unwrap();
    let consumer: async_nats::jetstream::consumer::PullConsumer = consumer_stream
        .get_consumer("flowgate-ingest")
        .await
        .unwrap();
    let mut fetched = consumer.fetch().max_messages(10).messages().await.unwrap();
    use futures_util::StreamExt;
    let first = fetched.next().await.unwrap().unwrap();
    let decoded = flowgate_jetstream::codec::decode(Some(FORMAT), &first.payload).unwrap();
    let store = FaultStore::new();
    store.append_events(&decoded).await.unwrap();
    drop(fetched);
    // After ack_wait the message comes again, to the real ingest.
    let (stop, task, stats) = start_ingest(&bus, &store);
    assert!(
        eventually(Duration::from_secs(10), || stats
            .messages_acknowledged
            .load(Ordering::Relaxed)
            >= 1
            && stats.redeliveries.load(Ordering::Relaxed) >= 1)
        .await
    );
    assert_eq!(store.ids().len(), 40);
    assert_eq!(stats.events_duplicate.load(Ordering::Relaxed), 40);
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_no_release_can_read_become_dead_letters_as_received() {
    let (_server, bus) = ready_bus().await;
    let js = async_nats::jetstream::new(bus.client().clone());
    // A body that is not events in a format this release reads: corrupt, whatever the release.
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(FORMAT_HEADER, FORMAT);
    js.publish_with_headers("flowgate.events", headers, vec![0xff, 0, 1].into())
        .await
        .unwrap()
        .await
        .unwrap();
    js.publish("flowgate.events", "no header".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let good = events(5);
    Publisher::new(&bus).append_events(&good).await.unwrap();

    let store = FaultStore::new();
    let (stop, task, stats) = start_ingest(&bus, &store);
    assert!(eventually(Duration::from_secs(10), || store.ids().len() == 5).await);
    let mut letters = Vec::new();
    for _ in 0..100 {
        letters = store.dead_letters();
        if letters.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(letters.len(), 2, "{letters:?}");
    let corrupt = letters.iter().find(|l| l.format == FORMAT).unwrap();
    assert_eq!(corrupt.payload, vec![0xff, 0, 1], "kept byte for byte");
    assert_eq!(corrupt.event_id, None);
    assert!(
        corrupt
            .error
            .contains("the body is not a JSON array of events in flowgate.events.v1+json"),
        "{}",
        corrupt.error
    );
    let plain = letters.iter().find(|l| l.format.is_empty()).unwrap();
    assert_eq!(plain.payload, b"no header");
    assert!(
        plain.error.contains("no Flowgate-Format header"),
        "{}",
        plain.error
    );
    // Terminated: not delivered again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(store.dead_letters().len(), 2);
    let lag = bus.lag().await.unwrap();
    assert_eq!((lag.pending, lag.unacknowledged), (0, 0));
    assert!(stats.unreadable_messages().is_empty());
    stop.send(true).unwrap();
    task.await.unwrap();
}

/// D26: a message in a format this release does not read (a later release's, during a rolling
/// upgrade) is neither acknowledged nor set aside: the durable consumer delivers it again, to
/// this process or another (a release that reads it), and each delivery is counted by format.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_in_a_format_this_release_does_not_read_stays_in_the_stream() {
    let (_server, bus) = ready_bus().await;
    let js = async_nats::jetstream::new(bus.client().clone());
    let later = "flowgate.events.v2+json";
    let body = br#"[{"event_id":"80000000-0000-4000-8000-000000000007","a_v2_member":1}]"#;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(FORMAT_HEADER, later);
    js.publish_with_headers("flowgate.events", headers, body.to_vec().into())
        .await
        .unwrap()
        .await
        .unwrap();
    let good = events(5);
    Publisher::new(&bus).append_events(&good).await.unwrap();

    let store = FaultStore::new();
    let (stop, task, stats) = start_ingest(&bus, &store);
    // The readable messages are stored; the other is handed back and delivered again.
    assert!(
        eventually(Duration::from_secs(15), || {
            store.ids().len() == 5
                && stats
                    .unreadable_messages()
                    .iter()
                    .any(|(format, n)| format == later && *n >= 3)
        })
        .await,
        "stored {}, unreadable {:?}",
        store.ids().len(),
        stats.unreadable_messages()
    );
    assert_eq!(stats.unreadable_messages().len(), 1, "one format");
    assert!(store.dead_letters().is_empty(), "not set aside");
    assert_eq!(stats.messages_dead_lettered.load(Ordering::Relaxed), 0);
    assert!(stats.messages_unreadable.load(Ordering::Relaxed) >= 3);
    stop.send(true).unwrap();
    task.await.unwrap();

    // Still in the stream (interest retention removes what was acknowledged: the stored
    // messages are gone, this one is not) ...
    let mut stream = js.get_stream("FLOWGATE_EVENTS").await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
    // ... and the same durable consumer delivers it again, as received, to whoever fetches
    // next (an ingest process of a release that reads it).
    let consumer: async_nats::jetstream::consumer::PullConsumer =
        stream.get_consumer("flowgate-ingest").await.unwrap();
    let mut batch = consumer
        .fetch()
        .max_messages(1)
        .expires(Duration::from_secs(5))
        .messages()
        .await
        .unwrap();
    use futures_util::StreamExt;
    let message = batch.next().await.unwrap().unwrap();
    assert_eq!(
        message
            .headers
            .as_ref()
            .unwrap()
            .get(FORMAT_HEADER)
            .unwrap()
            .as_str(),
        later
    );
    assert_eq!(&message.payload[..], &body[..]);
    assert!(message.info().unwrap().delivered >= 4);
    message.ack().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_events_are_isolated_and_the_rest_of_the_batch_is_stored() {
    let (_server, bus) = ready_bus().await;
    let batch = events(100);
    let store = FaultStore::new();
    store.poison("user-42");
    Publisher::new(&bus).append_events(&batch).await.unwrap();
    let (stop, task, stats) = start_ingest(&bus, &store);
    // The good events are stored before the refused one is set aside and counted: wait for all
    // three, then check them exactly.
    assert!(
        eventually(Duration::from_secs(10), || {
            store.ids().len() == 99
                && !store.dead_letters().is_empty()
                && stats.events_dead_lettered.load(Ordering::Relaxed) > 0
        })
        .await,
        "stored {}, dead letters {}, counted {}",
        store.ids().len(),
        store.dead_letters().len(),
        stats.events_dead_lettered.load(Ordering::Relaxed)
    );
    let letters = store.dead_letters();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].event_id, Some(batch[42].event_id));
    assert_eq!(stats.events_dead_lettered.load(Ordering::Relaxed), 1);
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_wait_in_the_stream_while_the_store_is_down() {
    let (_server, bus) = ready_bus().await;
    let batch = events(30);
    Publisher::new(&bus).append_events(&batch).await.unwrap();
    let store = FaultStore::new();
    store.down.store(true, Ordering::SeqCst);
    // The dead letters are down too (the same database): nothing may be set aside.
    store.dead_letters_down.store(true, Ordering::SeqCst);
    let (stop, task, stats) = start_ingest(&bus, &store);
    assert!(
        eventually(Duration::from_secs(10), || stats
            .write_failures
            .load(Ordering::Relaxed)
            >= 5)
        .await,
        "delivered again and again past max_deliveries (3)"
    );
    assert!(store.ids().is_empty());
    store.down.store(false, Ordering::SeqCst);
    store.dead_letters_down.store(false, Ordering::SeqCst);
    assert!(eventually(Duration::from_secs(10), || store.ids().len() == 30).await);
    assert!(store.dead_letters().is_empty(), "no dead letter");
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_cannot_be_stored_after_max_deliveries_is_a_dead_letter() {
    let (_server, bus) = ready_bus().await;
    let batch = events(7);
    Publisher::new(&bus).append_events(&batch).await.unwrap();
    let store = FaultStore::new();
    // Events cannot be written (say every write times out), dead letters can.
    store.down.store(true, Ordering::SeqCst);
    let (stop, task, stats) = start_ingest(&bus, &store);
    let mut letters = Vec::new();
    for _ in 0..200 {
        letters = store.dead_letters();
        if !letters.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(letters.len(), 1, "the message, whole");
    assert_eq!(letters[0].format, FORMAT);
    assert_eq!(letters[0].attempts, 3);
    assert!(
        letters[0].error.contains("not stored after 3 deliveries"),
        "{}",
        letters[0].error
    );
    let back = flowgate_jetstream::codec::decode(Some(FORMAT), &letters[0].payload).unwrap();
    assert_eq!(back, batch);
    assert_eq!(stats.messages_dead_lettered.load(Ordering::Relaxed), 1);
    stop.send(true).unwrap();
    task.await.unwrap();
}
