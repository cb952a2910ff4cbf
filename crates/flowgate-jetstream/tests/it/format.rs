//! The bus message format (`flowgate.events.v1+json`, D16) pinned byte for byte: other
//! consumers (a warehouse loader) read the stream, and messages outlive the version that wrote
//! them. A change to the body, the headers or the message id fails here; it needs a new
//! [`FORMAT`], and then `UPDATE_GOLDEN=1` rewrites the files.

use std::path::PathBuf;

use flowgate_contract_tests::fixtures::{assert_golden, sdk_event, server_event};
use flowgate_jetstream::codec::{decode, encode, COUNT_HEADER, FORMAT, FORMAT_HEADER};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn a_message_is_written_and_read_as_pinned() {
    let events = vec![sdk_event(7), server_event()];
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
    let golden = |name: &str, actual: &[u8]| assert_golden(&data(name), actual, FORMAT);
    golden("flowgate.events.v1+json-headers.txt", head.as_bytes());
    golden("flowgate.events.v1+json-body.json", &message.payload);
    // The committed body reads back as the same events (a consumer of an old message).
    let committed = std::fs::read(data("flowgate.events.v1+json-body.json")).unwrap();
    assert_eq!(decode(Some(FORMAT), &committed).unwrap(), events);
}
