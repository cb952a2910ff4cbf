//! Event validation (D7): any JSON body, an object or an array of them as the events endpoint
//! takes it, through `validate_event` against the fixture catalog (which knows the flow
//! versions). Invariants: nothing panics; an accepted event keeps the id, app and version it
//! was sent with; an error's code and message are never empty.
#![no_main]

use std::sync::OnceLock;

use flowgate_domain::events::{validate_event, ValidationLimits};
use flowgate_domain::ids::AppId;
use flowgate_domain::Catalog;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(flowgate_fuzz::catalog)
}

fuzz_target!(|data: &[u8]| {
    let Ok(body) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let app: AppId = flowgate_fuzz::APP.parse().expect("fixture app id");
    let limits = ValidationLimits::default();
    let items: Vec<&Value> = match &body {
        Value::Array(items) => items.iter().take(100).collect(),
        other => vec![other],
    };
    for raw in items {
        match validate_event(raw, app, catalog(), flowgate_fuzz::now(), &limits) {
            Ok(event) => {
                assert_eq!(event.app_id, app);
                let sent = raw
                    .get("event_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                assert_eq!(
                    event.event_id.0.hyphenated().to_string(),
                    sent.to_ascii_lowercase()
                );
            }
            Err(err) => {
                assert!(!err.code.as_str().is_empty() && !err.message.is_empty());
            }
        }
    }
});
