//! Store notifications (D30): Apple's and RevenueCat's documented fields read into
//! transactions, and the results' store metrics counted from them.

use std::collections::BTreeMap;

use flowgate_domain::ids::{AppId, ExperimentId};
use flowgate_domain::results::{report, Exposure, Folder, ResultsQuery, VariantSums};
use flowgate_domain::store_notifications::{
    read_apple, read_revenuecat, StoreSource, StoreTransaction,
};
use serde_json::json;
use time::macros::datetime;

fn app() -> AppId {
    crate::fixtures::APP1.parse().unwrap()
}

const USER: &str = "5f2b6a4e-8c1d-4e7a-9b3c-0d1e2f3a4b5c";

/// A notification as Apple documents `responseBodyV2DecodedPayload`.
fn apple(kind: &str, transaction: serde_json::Value) -> (serde_json::Value, serde_json::Value) {
    (
        json!({"notificationType": kind, "subtype": "INITIAL_BUY",
               "notificationUUID": format!("n-{kind}"), "version": "2.0", "signedDate": 1_764_000_000_000_i64,
               "data": {"bundleId": "com.example.app", "environment": "Production"}}),
        transaction,
    )
}

#[test]
fn apple_transactions_are_read_as_documented() {
    let (n, t) = apple(
        "SUBSCRIBED",
        json!({"transactionId": "t1", "originalTransactionId": "o1", "productId": "annual",
               "purchaseDate": 1_764_000_000_000_i64, "price": 0, "currency": "USD",
               "offerType": 1, "offerDiscountType": "FREE_TRIAL",
               "appAccountToken": USER.to_uppercase()}),
    );
    let read = read_apple(app(), &n, Some(&t), None).unwrap();
    assert_eq!(read.source, StoreSource::Apple);
    assert_eq!(read.notification_id, "n-SUBSCRIBED");
    assert_eq!(read.environment.as_deref(), Some("Production"));
    assert_eq!(read.payload["transaction"], t, "the verified JSON is kept");
    let tx = read.transaction.unwrap();
    assert!(tx.trial && !tx.refunded);
    assert_eq!(
        tx.user_id.as_deref(),
        Some(USER),
        "the token's canonical text"
    );
    assert_eq!(tx.purchased_at, datetime!(2025-11-24 16:00 UTC));

    // A renewal: 29990 milliunits are 29.99.
    let (n, t) = apple(
        "DID_RENEW",
        json!({"transactionId": "t2", "originalTransactionId": "o1", "purchaseDate": 1_764_604_800_000_i64,
               "price": 29990, "currency": "eur", "appAccountToken": USER}),
    );
    let tx = read_apple(app(), &n, Some(&t), None)
        .unwrap()
        .transaction
        .unwrap();
    assert_eq!(
        (tx.price, tx.currency.as_str(), tx.trial),
        (29.99, "EUR", false)
    );

    // Refunded: by the notification's type, or by a revocation date.
    for (kind, extra) in [
        ("REFUND", json!({})),
        (
            "DID_RENEW",
            json!({"revocationDate": 1_764_700_000_000_i64}),
        ),
    ] {
        let mut body = json!({"transactionId": "t2", "purchaseDate": 1_764_604_800_000_i64,
                              "price": 29990, "currency": "EUR"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (n, t) = apple(kind, body);
        let tx = read_apple(app(), &n, Some(&t), None)
            .unwrap()
            .transaction
            .unwrap();
        assert!(tx.refunded, "{kind}");
        assert_eq!(tx.original_transaction_id, "t2", "no original: its own id");
    }

    // A TEST carries no transaction.
    let test = json!({"notificationType": "TEST", "notificationUUID": "n-test"});
    assert_eq!(
        read_apple(app(), &test, None, None).unwrap().transaction,
        None
    );
}

#[test]
fn what_cannot_be_read_is_named_and_quoted() {
    let (n, _) = apple("DID_RENEW", json!({}));
    for (transaction, pointer, quoted) in [
        (
            json!({"purchaseDate": 1}),
            "/transaction/transactionId",
            "missing",
        ),
        (
            json!({"transactionId": "t", "purchaseDate": "yesterday"}),
            "/transaction/purchaseDate",
            "yesterday",
        ),
        (
            json!({"transactionId": "t", "purchaseDate": 1, "price": -5000, "currency": "USD"}),
            "/transaction/price",
            "-5",
        ),
        (
            json!({"transactionId": "t", "purchaseDate": 1, "price": 5000, "currency": "dollars"}),
            "/transaction/currency",
            "dollars",
        ),
        (
            json!({"transactionId": "t", "purchaseDate": 1, "price": 5000}),
            "/transaction/currency",
            "missing",
        ),
    ] {
        let error = read_apple(app(), &n, Some(&transaction), None).unwrap_err();
        assert_eq!(error.pointer, pointer, "{transaction}");
        assert!(error.message.contains(quoted), "{error}");
    }
    let error = read_apple(app(), &json!({"notificationType": "TEST"}), None, None).unwrap_err();
    assert_eq!(error.pointer, "/notificationUUID");
    let error = read_revenuecat(app(), &json!({"api_version": "1.0"})).unwrap_err();
    assert_eq!(error.pointer, "/event");
}

#[test]
fn revenuecat_events_are_read_as_documented() {
    let event = |kind: &str, extra: serde_json::Value| {
        let mut e = json!({"id": format!("e-{kind}"), "type": kind, "app_user_id": "user-1",
            "transaction_id": "t1", "original_transaction_id": "o1", "product_id": "annual",
            "purchased_at_ms": 1_764_000_000_000_i64, "environment": "PRODUCTION",
            "price": 32.5, "price_in_purchased_currency": 29.99, "currency": "EUR"});
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"api_version": "1.0", "event": e})
    };
    let read = read_revenuecat(
        app(),
        &event("INITIAL_PURCHASE", json!({"period_type": "NORMAL"})),
    )
    .unwrap();
    assert_eq!(read.source, StoreSource::RevenueCat);
    assert_eq!(read.notification_id, "e-INITIAL_PURCHASE");
    let tx = read.transaction.unwrap();
    assert_eq!(
        (tx.price, tx.currency.as_str()),
        (29.99, "EUR"),
        "the purchased currency"
    );
    assert_eq!(tx.user_id.as_deref(), Some("user-1"));
    let trial = read_revenuecat(
        app(),
        &event(
            "INITIAL_PURCHASE",
            json!({"period_type": "TRIAL", "price": 0}),
        ),
    )
    .unwrap();
    let tx = trial.transaction.unwrap();
    assert!(tx.trial);
    assert_eq!(tx.price, 0.0);
    for (reason, refunded) in [("CUSTOMER_SUPPORT", true), ("UNSUBSCRIBE", false)] {
        let read = read_revenuecat(
            app(),
            &event("CANCELLATION", json!({"cancel_reason": reason})),
        )
        .unwrap();
        assert_eq!(read.transaction.unwrap().refunded, refunded, "{reason}");
    }
    let test = read_revenuecat(
        app(),
        &json!({"api_version": "1.0", "event": {"id": "e-test", "type": "TEST"}}),
    )
    .unwrap();
    assert_eq!(test.transaction, None);
}

/// RevenueCat sends a refund (`CANCELLATION`, `CUSTOMER_SUPPORT`) with a negative price, as
/// its documentation says: it is read as the refunded amount, merged with the purchase, and
/// proceeds drop by it. A negative price on anything but a refund is still refused.
#[test]
fn a_revenuecat_refund_with_a_negative_price_lowers_proceeds() {
    let event = |id: &str, kind: &str, price: f64| {
        json!({"api_version": "1.0", "event": {"id": id, "type": kind,
            "cancel_reason": "CUSTOMER_SUPPORT", "app_user_id": "u", "transaction_id": "t1",
            "original_transaction_id": "t1", "period_type": "NORMAL",
            "purchased_at_ms": datetime!(2026-11-02 00:00 UTC).unix_timestamp() * 1000,
            "price": price, "price_in_purchased_currency": price, "currency": "USD"}})
    };
    let paid = read_revenuecat(app(), &event("e1", "INITIAL_PURCHASE", 20.0))
        .unwrap()
        .transaction
        .unwrap();
    let refund = read_revenuecat(app(), &event("e2", "CANCELLATION", -20.0))
        .unwrap()
        .transaction
        .unwrap();
    assert!(refund.refunded);
    assert_eq!(refund.price, 20.0, "the amount refunded");
    for kind in ["INITIAL_PURCHASE", "RENEWAL"] {
        let error = read_revenuecat(app(), &event("e3", kind, -20.0)).unwrap_err();
        assert_eq!(error.pointer, "/event/price", "{kind}");
        assert!(error.message.contains("-20"), "{error}");
    }
    let error = read_revenuecat(app(), &event("e4", "CANCELLATION", -2e6)).unwrap_err();
    assert!(error.message.contains("-2000000"), "{error}");

    let catalog = crate::fixtures::build(&crate::fixtures::catalog_json());
    let (app, experiment) = catalog
        .experiment(ExperimentId::from_uuid(
            crate::fixtures::EXP.parse().unwrap(),
        ))
        .unwrap();
    let query = ResultsQuery::new(
        app.id(),
        experiment,
        None,
        datetime!(2026-12-31 00:00 UTC),
        &[],
        "USD",
        BTreeMap::new(),
    )
    .with_store_metrics(30);
    let exposed = [Exposure {
        at: datetime!(2026-11-01 00:00 UTC),
        variant: 0,
    }];
    let proceeds = |transactions: &[StoreTransaction]| {
        let mut folder = Folder::new(&query);
        folder.user_with(&exposed, &[], transactions);
        folder.finish().variants[0].store
    };
    assert_eq!(proceeds(std::slice::from_ref(&paid)).proceeds.sum, 20.0);
    let refunded = proceeds(&[paid, refund]);
    assert_eq!((refunded.paid, refunded.refunded), (1, 1));
    assert_eq!(refunded.proceeds.sum, 0.0, "the refund is taken back");
}

fn tx(
    id: &str,
    original: &str,
    day: i64,
    price: f64,
    trial: bool,
    refunded: bool,
) -> StoreTransaction {
    let read = read_revenuecat(
        app(),
        &json!({"api_version": "1.0", "event": {"id": format!("e-{id}-{refunded}"),
            "type": if refunded { "CANCELLATION" } else { "RENEWAL" },
            "cancel_reason": "CUSTOMER_SUPPORT", "app_user_id": "u",
            "transaction_id": id, "original_transaction_id": original,
            "purchased_at_ms": (datetime!(2026-11-01 00:00 UTC) + time::Duration::days(day)).unix_timestamp() * 1000,
            "period_type": if trial { "TRIAL" } else { "NORMAL" },
            "price_in_purchased_currency": price, "currency": if price >= 500.0 { "JPY" } else { "EUR" }}}),
    )
    .unwrap();
    read.transaction.unwrap()
}

/// D30's figures per user: a trial converted by a later paid transaction of its subscription,
/// a refund taken back from proceeds, each transaction once however many notifications tell
/// it, nothing before the first exposure or past the horizon, proceeds converted or left out.
#[test]
fn store_metrics_count_each_user_once_within_the_horizon() {
    let catalog = crate::fixtures::build(&crate::fixtures::catalog_json());
    let (app, experiment) = catalog
        .experiment(ExperimentId::from_uuid(
            crate::fixtures::EXP.parse().unwrap(),
        ))
        .unwrap();
    let query = ResultsQuery::new(
        app.id(),
        experiment,
        None,
        datetime!(2026-12-31 00:00 UTC),
        &[],
        "USD",
        BTreeMap::from([("EUR".to_owned(), 1.5)]),
    )
    .with_store_metrics(30);
    let exposed = |variant| {
        [Exposure {
            at: datetime!(2026-11-01 00:00 UTC),
            variant,
        }]
    };
    let mut folder = Folder::new(&query);
    // Control: a trial converted on day 7 (told twice), refunded later; a paid one past the
    // horizon; a purchase in a currency without a rate.
    folder.user_with(
        &exposed(0),
        &[],
        &[
            tx("t1", "o1", 0, 0.0, true, false),
            tx("t2", "o1", 7, 10.0, false, false),
            tx("t2", "o1", 7, 10.0, false, false),
            tx("t2", "o1", 7, 10.0, false, true),
            tx("t3", "o3", 45, 20.0, false, false),
            tx("t4", "o4", 3, 500.0, false, false),
        ],
    );
    // Control: a trial that never converted, and a paid purchase of another subscription.
    folder.user_with(
        &exposed(0),
        &[],
        &[
            tx("t5", "o5", 1, 0.0, true, false),
            tx("t6", "o6", 2, 4.0, false, false),
        ],
    );
    // New: a purchase before the exposure does not count; one after does.
    folder.user_with(
        &[Exposure {
            at: datetime!(2026-11-05 00:00 UTC),
            variant: 1,
        }],
        &[],
        &[
            tx("t7", "o7", 1, 8.0, false, false),
            tx("t8", "o8", 6, 8.0, false, false),
        ],
    );
    let data = folder.finish();
    let counts = |i: usize| data.variants[i].store;
    let control = counts(0);
    assert_eq!(
        (
            control.trial_started,
            control.trial_converted,
            control.paid,
            control.refunded
        ),
        (2, 1, 2, 1)
    );
    // Proceeds: user 1: 15 - 15 (refunded) = 0; user 2: 4 EUR = 6 USD.
    assert_eq!(
        control.proceeds,
        VariantSums {
            users: 2,
            sum: 6.0,
            sum_squares: 36.0
        }
    );
    assert_eq!(data.unconverted_purchases, 1, "the JPY purchase");
    assert_eq!(counts(1).paid, 1);
    assert_eq!(counts(1).proceeds.sum, 12.0);

    let r = report(app.id(), experiment, &query, &data);
    let names: Vec<&str> = r.metrics.iter().map(|m| m.metric.as_str()).collect();
    assert_eq!(
        names,
        [
            "flow_complete",
            "purchase_complete",
            "revenue",
            "trial_started",
            "trial_converted",
            "paid",
            "refunded",
            "proceeds"
        ]
    );
    assert_eq!(
        r.metrics[5].variants[0].sums.sum, 2.0,
        "paid users of the control"
    );
    assert_eq!(r.metrics[7].variants[1].mean, 12.0, "proceeds per user");
    // Without store metrics, none of them.
    let mut plain = query.clone();
    plain.store_horizon_days = None;
    assert_eq!(report(app.id(), experiment, &plain, &data).metrics.len(), 3);
}

/// `formats/flowgate.store-notification/v<N>/<name>`.
fn sample(version: u32, name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../formats/flowgate.store-notification")
        .join(format!("v{version}"))
        .join(name)
}

/// The stored `payload` of each source is the current version's golden sample (D26), byte for
/// byte, and each sample still says what this release reads from it.
#[test]
fn the_stored_payloads_are_their_formats_samples() {
    use flowgate_contract_tests::fixtures::assert_golden;
    use flowgate_domain::store_notifications::FORMAT;
    let (n, t) = apple(
        "DID_RENEW",
        json!({"transactionId": "t2", "originalTransactionId": "o1", "purchaseDate": 1_764_604_800_000_i64,
               "price": 29990, "currency": "EUR", "appAccountToken": USER}),
    );
    let renewal = json!({"autoRenewStatus": 1, "originalTransactionId": "o1"});
    let apple = read_apple(app(), &n, Some(&t), Some(&renewal)).unwrap();
    let revenuecat = read_revenuecat(
        app(),
        &json!({"api_version": "1.0", "event": {"id": "e1", "type": "RENEWAL", "app_user_id": "user-1",
            "transaction_id": "t1", "original_transaction_id": "o1", "purchased_at_ms": 1_764_000_000_000_i64,
            "period_type": "NORMAL", "price_in_purchased_currency": 29.99, "currency": "EUR"}}),
    )
    .unwrap();
    for (name, read) in [("apple.json", &apple), ("revenuecat.json", &revenuecat)] {
        let mut text = serde_json::to_string_pretty(&read.payload).unwrap();
        text.push('\n');
        assert_golden(
            &sample(FORMAT, name),
            text.as_bytes(),
            "flowgate.store-notification",
        );
    }
    // Version 1: Apple's parts under `notification`, `transaction`, `renewal`; RevenueCat's
    // event as sent.
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sample(1, "apple.json")).unwrap()).unwrap();
    let again = read_apple(
        app(),
        &stored["notification"],
        Some(&stored["transaction"]),
        Some(&stored["renewal"]),
    )
    .unwrap();
    assert_eq!(again.transaction, apple.transaction);
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sample(1, "revenuecat.json")).unwrap())
            .unwrap();
    let again = read_revenuecat(app(), &json!({"event": stored})).unwrap();
    assert_eq!(again.transaction, revenuecat.transaction);
}
