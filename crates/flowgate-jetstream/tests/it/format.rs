//! The bus message format (`flowgate.events.v1+json`, D16, D26): other consumers (a warehouse
//! loader) read the stream, and messages outlive the release that wrote them (two releases
//! share the stream during an upgrade). The golden samples of each version live in the
//! repository's `formats/flowgate.events+json/v<N>/` and are never rewritten
//! (`formats/MANIFEST.sha256`): the writer is compared with the current version's samples, and
//! this reader must read the samples of every version it lists in `READS`.

use std::path::PathBuf;

use flowgate_contract_tests::fixtures::{assert_golden, formats_dir};
use flowgate_domain::events::AnalyticsEvent;
use flowgate_jetstream::codec::{decode, encode, COUNT_HEADER, FORMAT, FORMAT_HEADER, READS};

fn sample(version: &str, name: &str) -> PathBuf {
    formats_dir()
        .join("flowgate.events+json")
        .join(version)
        .join(name)
}

/// The body samples of each version and the events each holds.
fn samples() -> Vec<(&'static str, PathBuf, Vec<AnalyticsEvent>)> {
    vec![(
        "flowgate.events.v1+json",
        sample("v1", "body.json"),
        vec![AnalyticsEvent::sample(7), AnalyticsEvent::sample_no_flow()],
    )]
}

#[test]
fn a_message_is_written_as_pinned() {
    let events = vec![AnalyticsEvent::sample(7), AnalyticsEvent::sample_no_flow()];
    let messages = encode(&events, 1024 * 1024).unwrap();
    assert_eq!(messages.len(), 1);
    let message = &messages[0];
    let headers = message.headers();
    let header = |name: &str| headers.get(name).map(|v| v.as_str().to_owned());
    let head = format!(
        "{FORMAT_HEADER}: {}\n{COUNT_HEADER}: {}\nNats-Msg-Id: {}\n",
        header(FORMAT_HEADER).unwrap(),
        header(COUNT_HEADER).unwrap(),
        message.id
    );
    assert_golden(&sample("v1", "headers.txt"), head.as_bytes(), FORMAT);
    assert_golden(&sample("v1", "body.json"), &message.payload, FORMAT);
}

#[test]
fn every_version_read_has_samples_and_each_reads_as_its_events() {
    let samples = samples();
    for format in READS {
        assert!(
            samples.iter().any(|(f, _, _)| f == format),
            "no golden sample of {format}, which this release reads"
        );
    }
    for (format, path, events) in samples {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            decode(Some(format), &bytes).unwrap(),
            events,
            "{}",
            path.display()
        );
    }
}

/// A message a later release wrote whose events have a member this one does not know (an
/// added optional member, no new version): read, the member ignored.
#[test]
fn a_v1_message_with_a_member_this_release_does_not_know_reads() {
    let (format, path, events) = samples().remove(0);
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    for event in json.as_array_mut().unwrap() {
        event["a_member_of_a_later_release"] = serde_json::json!({"nested": [1, "two"]});
    }
    let bytes = serde_json::to_vec(&json).unwrap();
    assert_eq!(decode(Some(format), &bytes).unwrap(), events);
}

/// A message an earlier release wrote before an optional member existed: read, the member
/// absent.
#[test]
fn a_v1_message_without_optional_members_reads_them_as_absent() {
    let (format, path, events) = samples().remove(0);
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    for event in json.as_array_mut().unwrap() {
        let object = event.as_object_mut().unwrap();
        object.remove("sdk_version");
        object.remove("reason");
        object.remove("payload");
    }
    let bytes = serde_json::to_vec(&json).unwrap();
    let expected: Vec<AnalyticsEvent> = events
        .into_iter()
        .map(|e| {
            e.with_sdk_version(None)
                .with_reason(None)
                .with_payload(serde_json::Map::new())
        })
        .collect();
    assert_eq!(decode(Some(format), &bytes).unwrap(), expected);
}
