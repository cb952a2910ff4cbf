//! Store notifications (D30): any bytes as Apple's `signedPayload` through the JWS verifier
//! (against Apple's root: nothing forged verifies), and any JSON through the readers of
//! Apple's decoded parts and RevenueCat's webhook body. Invariants: nothing panics; a refusal
//! has a code (Apple) or a pointer and a message (readers); a read transaction's price is a
//! finite non-negative amount, its currency empty or three upper-case letters, and its
//! purchase date within the years 0 to 9999 that both stores hold.
#![no_main]

use std::sync::OnceLock;

use flowgate_domain::ids::AppId;
use flowgate_domain::store_notifications::{read_apple, read_revenuecat, StoreNotification};
use flowgate_http::apple_jws::{verify, AppleRoots};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn roots() -> &'static AppleRoots {
    static ROOTS: OnceLock<AppleRoots> = OnceLock::new();
    ROOTS.get_or_init(AppleRoots::apple)
}

fn check(read: &StoreNotification) {
    if let Some(t) = &read.transaction {
        assert!(t.price.is_finite() && t.price >= 0.0);
        assert!(t.currency.is_empty() || (t.currency.len() == 3 && t.currency.bytes().all(|b| b.is_ascii_uppercase())));
        assert!((0..=9999).contains(&t.purchased_at.year()));
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(e) = verify(roots(), text, flowgate_fuzz::now()) {
            assert!(!e.code().is_empty());
        }
    }
    let Ok(body) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let app: AppId = flowgate_fuzz::APP.parse().expect("fixture app id");
    match read_revenuecat(app, &body) {
        Ok(read) => check(&read),
        Err(e) => assert!(!e.message.is_empty()),
    }
    let transaction = body.get("transaction");
    match read_apple(app, &body, transaction, body.get("renewal")) {
        Ok(read) => check(&read),
        Err(e) => assert!(!e.message.is_empty()),
    }
});
