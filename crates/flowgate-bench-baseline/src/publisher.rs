//! The JetStream baseline of `make bench-http`: a minimal async-nats publisher of the same
//! messages `flowgate serve` published, so the two rates compare (D16).
//!
//! `flowgate-bench-publisher URL FROM_STREAM TO_SUBJECT IN_FLIGHT`: reads every message of
//! FROM_STREAM (an ordered consumer: the stream's durable consumers are untouched) into
//! memory, then three times creates the stream `BENCH_PUBLISH` on TO_SUBJECT (file storage,
//! one replica, as flowgate's) and publishes the messages, headers and `Nats-Msg-Id`
//! included, keeping at most IN_FLIGHT acknowledgements pending; it prints one JSON line:
//! messages, events (the `Flowgate-Events` headers' sum), the median round's seconds, every
//! round's, events/s.
//! No encoding, no batching decisions, no retries: the limit of the client and the server.

use std::collections::VecDeque;
use std::time::Instant;

use async_nats::jetstream::consumer::pull::OrderedConfig;
use async_nats::jetstream::message::PublishMessage;
use futures_util::StreamExt;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, from, to, in_flight] = args.as_slice() else {
        eprintln!("usage: flowgate-bench-publisher URL FROM_STREAM TO_SUBJECT IN_FLIGHT");
        std::process::exit(2);
    };
    let in_flight: usize = in_flight.parse().unwrap_or(40).max(1);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run(url, from, to, in_flight)) {
        eprintln!("flowgate-bench-publisher: {e}");
        std::process::exit(1);
    }
}

async fn run(url: &str, from: &str, to: &str, in_flight: usize) -> Result<(), async_nats::Error> {
    let client = async_nats::connect(url).await?;
    let js = async_nats::jetstream::ContextBuilder::new()
        .max_ack_inflight(in_flight * 2)
        .build(client);
    let mut stream = js.get_stream(from).await?;
    let total = stream.info().await?.state.messages;
    let consumer = stream.create_consumer(OrderedConfig::default()).await?;
    let mut messages = consumer.messages().await?;
    let mut read = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    while (read.len() as u64) < total {
        let Some(message) = messages.next().await else {
            break;
        };
        read.push(message?);
    }
    let events: u64 = read
        .iter()
        .filter_map(|m| {
            m.headers
                .as_ref()?
                .get("Flowgate-Events")?
                .as_str()
                .parse::<u64>()
                .ok()
        })
        .sum();
    // Three rounds, each into a fresh stream; the median is reported (one round on this
    // shared machine moves with the disk's write-back of the runs before it).
    let mut rounds = Vec::with_capacity(3);
    for _ in 0..3 {
        let _ = js.delete_stream("BENCH_PUBLISH").await;
        js.create_stream(async_nats::jetstream::stream::Config {
            name: "BENCH_PUBLISH".to_owned(),
            subjects: vec![to.to_owned()],
            storage: async_nats::jetstream::stream::StorageType::File,
            duplicate_window: std::time::Duration::from_secs(120),
            ..Default::default()
        })
        .await?;
        let started = Instant::now();
        let mut pending = VecDeque::with_capacity(in_flight);
        for message in &read {
            if pending.len() == in_flight {
                if let Some(ack) = pending.pop_front() {
                    let ack: async_nats::jetstream::context::PublishAckFuture = ack;
                    ack.await?;
                }
            }
            let mut publish = PublishMessage::build().payload(message.payload.clone());
            if let Some(headers) = &message.headers {
                publish = publish.headers(headers.clone());
            }
            pending.push_back(js.send_publish(to.to_owned(), publish).await?);
        }
        for ack in pending {
            ack.await?;
        }
        rounds.push(started.elapsed().as_secs_f64());
    }
    let _ = js.delete_stream("BENCH_PUBLISH").await;
    let all = rounds
        .iter()
        .map(|s| format!("{s:.4}"))
        .collect::<Vec<_>>()
        .join(", ");
    rounds.sort_by(f64::total_cmp);
    let secs = rounds[1];
    println!(
        "{{\"messages\": {}, \"events\": {events}, \"seconds\": {secs:.4}, \"rounds\": [{all}], \"events_per_s\": {:.0}}}",
        read.len(),
        events as f64 / secs
    );
    Ok(())
}
