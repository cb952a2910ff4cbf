//! Condition parsing and evaluation (D4): any JSON document through the strict and the lenient
//! compiler, then evaluated against attributes and saved groups from the same input.
//!
//! Input: JSON. An array `[condition, attributes, saved_groups?]` is split that way; any other
//! value is the condition, evaluated against no attributes. Invariants: nothing panics, and a
//! document the strict compiler accepts evaluates the same through the lenient one.
#![no_main]

use flowgate_domain::conditions::{Condition, SavedGroups};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let empty = Value::Object(Default::default());
    let (doc, attrs, groups) = match &input {
        Value::Array(parts) if parts.len() >= 2 => (&parts[0], &parts[1], parts.get(2)),
        other => (other, &empty, None),
    };
    let groups = match groups.and_then(Value::as_object) {
        Some(map) => SavedGroups::new(
            map.iter()
                .filter_map(|(id, members)| members.as_array().map(|m| (id.clone(), m.clone()))),
        ),
        None => SavedGroups::empty(),
    };
    let lenient = Condition::compile_lenient(doc);
    let lenient_result = lenient.eval(attrs, &groups);
    if let Ok(strict) = Condition::compile(doc) {
        assert_eq!(
            strict.eval(attrs, &groups),
            lenient_result,
            "strict and lenient compilations of an accepted document disagree"
        );
    }
});
