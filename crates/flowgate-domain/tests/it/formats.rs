//! The dead-letter format of one event (`flowgate.event.v1+json`, D17, D26): letters written
//! by one release are replayed by the next and by the previous one. The golden samples of each
//! version live in the repository's `formats/flowgate.event+json/v<N>/` and are never
//! rewritten (`formats/MANIFEST.sha256`): the writer is compared with the current version's
//! samples, and this reader must read the samples of every version it lists in
//! `EVENT_JSON_READS`.

use std::path::PathBuf;

use flowgate_contract_tests::fixtures::{assert_golden, at, formats_dir};
use flowgate_domain::delivery::{
    dead_letter, decode_event, decode_event_in, EVENT_JSON_FORMAT, EVENT_JSON_READS,
};
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::StoreError;

fn sample(version: &str, name: &str) -> PathBuf {
    formats_dir()
        .join("flowgate.event+json")
        .join(version)
        .join(name)
}

/// The samples of each version and the event each holds.
fn samples() -> Vec<(&'static str, PathBuf, AnalyticsEvent)> {
    vec![
        (
            "flowgate.event.v1+json",
            sample("v1", "sdk.json"),
            AnalyticsEvent::sample(7),
        ),
        (
            "flowgate.event.v1+json",
            sample("v1", "server.json"),
            AnalyticsEvent::sample_no_flow(),
        ),
    ]
}

#[test]
fn a_dead_letter_holds_the_event_as_pinned() {
    let error = StoreError::Unstorable {
        detail: "refused".to_owned(),
    };
    for (name, event) in [
        ("sdk.json", AnalyticsEvent::sample(7)),
        ("server.json", AnalyticsEvent::sample_no_flow()),
    ] {
        let letter = dead_letter(&event, &error, at(5)).unwrap();
        assert_eq!(letter.format, EVENT_JSON_FORMAT);
        assert_golden(&sample("v1", name), &letter.payload, EVENT_JSON_FORMAT);
    }
}

#[test]
fn every_version_read_has_samples_and_each_reads_as_its_event() {
    let samples = samples();
    for format in EVENT_JSON_READS {
        assert!(
            samples.iter().any(|(f, _, _)| f == format),
            "no golden sample of {format}, which this release reads"
        );
    }
    for (format, path, event) in samples {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            decode_event_in(format, &bytes).unwrap(),
            event,
            "{}",
            path.display()
        );
    }
}

/// A letter written by a later release whose event has a member this one does not know
/// (an added optional member, no new version): read, the member ignored.
#[test]
fn a_v1_letter_with_a_member_this_release_does_not_know_reads() {
    for (_, path, event) in samples() {
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        json["a_member_of_a_later_release"] = serde_json::json!({"nested": [1, "two"]});
        json["another_one"] = serde_json::json!(null);
        let bytes = serde_json::to_vec(&json).unwrap();
        assert_eq!(decode_event(&bytes).unwrap(), event, "{}", path.display());
    }
}

/// A letter written by an earlier release that did not have an optional member yet: read, the
/// member absent (`None`, an empty payload).
#[test]
fn a_v1_letter_without_its_optional_members_reads_them_as_absent() {
    let path = sample("v1", "sdk.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let object = json.as_object_mut().unwrap();
    for optional in [
        "flow_id",
        "flow_version_id",
        "placement_key",
        "sdk_version",
        "experiment_id",
        "variant_id",
        "variant_name",
        "reason",
        "payload",
    ] {
        assert!(
            object.remove(optional).is_some(),
            "{optional} is in the sample"
        );
    }
    let read = decode_event(&serde_json::to_vec(&json).unwrap()).unwrap();
    let expected = AnalyticsEvent::sample(7)
        .with_flow_id(None)
        .with_flow_version_id(None)
        .with_placement_key(None)
        .with_sdk_version(None)
        .with_payload(serde_json::Map::new());
    assert_eq!(read, expected);
}

#[test]
fn a_format_this_release_does_not_read_is_named_in_the_refusal() {
    let bytes = std::fs::read(sample("v1", "sdk.json")).unwrap();
    let error = decode_event_in("flowgate.event.v2+json", &bytes).unwrap_err();
    assert_eq!(
        error,
        "format \"flowgate.event.v2+json\" is not one this release reads (flowgate.event.v1+json)"
    );
}
