//! The dead-letter format of one event (`flowgate.event.v1+json`, D17) pinned byte for byte:
//! letters written by one version are replayed by the next, and tools read them. A change to
//! the encoding of `AnalyticsEvent` fails here; it needs a new format name, and then
//! `UPDATE_GOLDEN=1` rewrites the files.

use std::path::PathBuf;

use flowgate_contract_tests::fixtures::{assert_golden, at, sdk_event, server_event};
use flowgate_domain::delivery::{dead_letter, decode_event, EVENT_JSON_FORMAT};
use flowgate_domain::ports::StoreError;

#[test]
fn a_dead_letter_holds_the_event_as_pinned() {
    let error = StoreError::Unstorable {
        detail: "refused".to_owned(),
    };
    for (name, event) in [
        ("flowgate.event.v1+json-sdk.json", sdk_event(7)),
        ("flowgate.event.v1+json-server.json", server_event()),
    ] {
        let letter = dead_letter(&event, &error, at(5)).unwrap();
        assert_eq!(letter.format, EVENT_JSON_FORMAT);
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/formats")
            .join(name);
        assert_golden(&path, &letter.payload, EVENT_JSON_FORMAT);
        // And the committed bytes read back as the same event (a replay of an old letter).
        let committed = std::fs::read(&path).unwrap();
        assert_eq!(decode_event(&committed).unwrap(), event);
    }
}
