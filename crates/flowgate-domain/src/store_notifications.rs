//! Revenue the stores report (D30): App Store Server Notifications V2 and RevenueCat webhooks,
//! read into one shape, [`StoreNotification`], whose [`StoreTransaction`] the results count as
//! `trial_started`, `trial_converted`, `paid`, `refunded` and `proceeds`.
//!
//! This module reads what was already authenticated: the adapters verify Apple's signatures
//! (the JWS chain to a trusted root) and RevenueCat's webhook key, then hand the decoded JSON
//! here. Reading never panics and names what is missing or wrong with its JSON pointer.
//!
//! # Versions
//!
//! The one place that says which versions of a stored notification exist (D26): each is stored
//! with the fields below in columns and the verified JSON as `payload` (Apple: `{"notification":
//! <decoded signedPayload>, "transaction": <decoded signedTransactionInfo>, "renewal": <decoded
//! signedRenewalInfo>}`, absent members left out; RevenueCat: its `event`). Golden samples are
//! in `formats/flowgate.store-notification/v<N>/`.
//!
//! | version | written by | what changed |
//! |---|---|---|
//! | 1 | 0.3.0 and later | the first |

use serde_json::Value;
use time::OffsetDateTime;

use crate::ids::AppId;

/// The stored version of a notification this release writes (see the module's Versions).
pub const FORMAT: u32 = 1;

/// Most bytes of a notification body the store routes read (an Apple notification with its
/// three certificate chains is about 10 KB).
pub const MAX_BODY: usize = 64 * 1024;

/// Where a notification came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreSource {
    /// App Store Server Notifications V2.
    Apple,
    /// A RevenueCat webhook.
    RevenueCat,
}

impl StoreSource {
    /// `apple` or `revenuecat`, as stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            StoreSource::Apple => "apple",
            StoreSource::RevenueCat => "revenuecat",
        }
    }

    /// The source named `name`, as stored.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "apple" => Some(StoreSource::Apple),
            "revenuecat" => Some(StoreSource::RevenueCat),
            _ => None,
        }
    }
}

/// One notification, authenticated and read (D30).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct StoreNotification {
    /// The app it was sent for.
    pub app_id: AppId,
    /// Who sent it.
    pub source: StoreSource,
    /// Apple's `notificationUUID`, RevenueCat's `event.id`: stored once per app and source.
    pub notification_id: String,
    /// Apple's `notificationType`, RevenueCat's `event.type` (e.g. `SUBSCRIBED`, `RENEWAL`).
    pub notification_type: String,
    /// Apple's `subtype`, if any.
    pub subtype: Option<String>,
    /// `Production` or `Sandbox` (Apple), `PRODUCTION` or `SANDBOX` (RevenueCat), if given.
    pub environment: Option<String>,
    /// The transaction it reports, if any (a `TEST` has none).
    pub transaction: Option<StoreTransaction>,
    /// The verified JSON, as the module's Versions say.
    pub payload: Value,
}

/// A store transaction: what the results count (D30).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct StoreTransaction {
    /// The user the app gave the store (Apple's `appAccountToken`, RevenueCat's
    /// `app_user_id`), matched to events' `user_id`; `None`: the app gave none.
    pub user_id: Option<String>,
    /// The transaction.
    pub transaction_id: String,
    /// The subscription it belongs to (its first transaction).
    pub original_transaction_id: String,
    /// The product, if given.
    pub product_id: Option<String>,
    /// When it was bought (Apple `purchaseDate`, RevenueCat `purchased_at_ms`).
    pub purchased_at: OffsetDateTime,
    /// Its price in units of `currency` (Apple's milliunits divided by 1000); 0 for a free
    /// trial. Never negative: a refund carries the price it gave back (RevenueCat's negative
    /// refund price, as a positive amount).
    pub price: f64,
    /// ISO 4217, upper-case; empty when the store gave none (a free trial).
    pub currency: String,
    /// Whether it starts a free trial.
    pub trial: bool,
    /// Whether it was refunded (revoked).
    pub refunded: bool,
}

impl StoreTransaction {
    /// Transaction `transaction_id` bought at `purchased_at`, its own subscription, free, not
    /// a trial, not refunded, of no known user: set the other fields as read.
    pub fn bought(transaction_id: String, purchased_at: OffsetDateTime) -> Self {
        Self {
            user_id: None,
            original_transaction_id: transaction_id.clone(),
            transaction_id,
            product_id: None,
            purchased_at,
            price: 0.0,
            currency: String::new(),
            trial: false,
            refunded: false,
        }
    }
}

/// Why a verified notification cannot be read: the JSON pointer and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {message}")]
pub struct NotificationError {
    /// Where, as a JSON pointer into what was read.
    pub pointer: String,
    /// What is wrong, quoting the value.
    pub message: String,
}

fn wrong(pointer: &str, message: impl Into<String>) -> NotificationError {
    NotificationError {
        pointer: pointer.to_owned(),
        message: message.into(),
    }
}

/// A required non-empty string member of `object` at `pointer`, at most 256 bytes.
fn text(object: &Value, pointer: &str, name: &str) -> Result<String, NotificationError> {
    match object.get(name) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => Ok(s.clone()),
        Some(Value::String(s)) => Err(wrong(
            &format!("{pointer}/{name}"),
            format!(
                "must be 1 to 256 bytes, not {} bytes: {}",
                s.len(),
                crate::shown::shown_str(s)
            ),
        )),
        Some(other) => Err(wrong(
            &format!("{pointer}/{name}"),
            format!("must be a string, not {}", crate::shown::shown(other)),
        )),
        None => Err(wrong(&format!("{pointer}/{name}"), "is missing")),
    }
}

/// An optional string member (absent or `null`: `None`).
fn optional_text(
    object: &Value,
    pointer: &str,
    name: &str,
) -> Result<Option<String>, NotificationError> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => text(object, pointer, name).map(Some),
    }
}

/// The earliest time a notification may carry: the start of year 0.
///
/// The stores hold different ranges: PostgreSQL's `timestamptz` from 4713 BC to 294276 AD,
/// SQLite's fixed-width RFC 3339 text years 0 to 9999, the `time` crate years -9999 to 9999.
/// A time outside what both hold would be refused by the store on every retry (a 503 that
/// the app stores retry for days), so it is refused when read, quoted, before anything is
/// written.
const EARLIEST: OffsetDateTime = time::macros::datetime!(0000-01-01 00:00 UTC);

/// The latest time a notification may carry: the end of year 9999 (see [`EARLIEST`]).
const LATEST: OffsetDateTime = time::macros::datetime!(9999-12-31 23:59:59.999_999_999 UTC);

/// A time in milliseconds since the epoch, as both stores write them, within the years the
/// stores hold ([`EARLIEST`] to [`LATEST`]).
fn millis(
    object: &Value,
    pointer: &str,
    name: &str,
) -> Result<Option<OffsetDateTime>, NotificationError> {
    let at = format!("{pointer}/{name}");
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let ms = n
                .as_i64()
                .ok_or_else(|| wrong(&at, format!("must be whole milliseconds, not {n}")))?;
            match OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000) {
                Ok(t) if (EARLIEST..=LATEST).contains(&t) => Ok(Some(t)),
                Ok(t) => Err(wrong(
                    &at,
                    format!(
                        "{ms} ms is year {}: the stores hold years 0 to 9999",
                        t.year()
                    ),
                )),
                Err(_) => Err(wrong(
                    &at,
                    format!("{ms} ms is not a time of years 0 to 9999"),
                )),
            }
        }
        Some(other) => Err(wrong(
            &at,
            format!(
                "must be milliseconds since the epoch, not {}",
                crate::shown::shown(other)
            ),
        )),
    }
}

/// A price: a finite number from 0 to 1,000,000 (units), as D7 bounds revenue.
fn price(value: f64, at: &str) -> Result<f64, NotificationError> {
    if value.is_finite() && (0.0..=1_000_000.0).contains(&value) {
        Ok(value)
    } else {
        Err(wrong(
            at,
            format!("must be a price from 0 to 1000000, not {value}"),
        ))
    }
}

/// The amount a refund gave back: RevenueCat documents a refund's `price` and
/// `price_in_purchased_currency` as possibly negative ("Can be negative for refunds",
/// <https://www.revenuecat.com/docs/integrations/webhooks/event-types-and-fields>), so either
/// sign from -1,000,000 to 1,000,000 is read, and its magnitude kept. A refunded transaction
/// then carries its paid price, as Apple's `REFUND` does, and the results take it back from
/// proceeds (D30).
fn refund_price(value: f64, at: &str) -> Result<f64, NotificationError> {
    if value.is_finite() && (-1_000_000.0..=1_000_000.0).contains(&value) {
        Ok(value.abs())
    } else {
        Err(wrong(
            at,
            format!("must be a refund from -1000000 to 1000000, not {value}"),
        ))
    }
}

/// A currency: three ASCII letters, upper-cased.
fn currency(value: &str, at: &str) -> Result<String, NotificationError> {
    if value.len() == 3 && value.bytes().all(|b| b.is_ascii_alphabetic()) {
        Ok(value.to_ascii_uppercase())
    } else {
        Err(wrong(
            at,
            format!(
                "must be an ISO 4217 code, not {}",
                crate::shown::shown_str(value)
            ),
        ))
    }
}

/// Reads an App Store Server Notification V2 (D30) from its decoded, verified parts: the
/// `signedPayload`'s payload, and the decoded `signedTransactionInfo` and
/// `signedRenewalInfo` when it carried them. The adapter checks `data.bundleId` and
/// `data.environment` against the app ([`apple_bundle`] reads them).
///
/// A transaction starts a free trial when its `offerType` is 1 (introductory) and its
/// `offerDiscountType` is `FREE_TRIAL`; it is refunded when the notification is a `REFUND` or
/// `REVOKE`, or the transaction has a `revocationDate`.
pub fn read_apple(
    app_id: AppId,
    notification: &Value,
    transaction: Option<&Value>,
    renewal: Option<&Value>,
) -> Result<StoreNotification, NotificationError> {
    if !notification.is_object() {
        return Err(wrong("", "the payload must be an object"));
    }
    let notification_id = text(notification, "", "notificationUUID")?;
    let notification_type = text(notification, "", "notificationType")?;
    let subtype = optional_text(notification, "", "subtype")?;
    let environment = match notification.get("data") {
        Some(data) => optional_text(data, "/data", "environment")?,
        None => None,
    };
    let read = transaction
        .map(|t| apple_transaction(t, &notification_type))
        .transpose()?;
    let mut payload = serde_json::Map::new();
    payload.insert("notification".to_owned(), notification.clone());
    if let Some(t) = transaction {
        payload.insert("transaction".to_owned(), t.clone());
    }
    if let Some(r) = renewal {
        payload.insert("renewal".to_owned(), r.clone());
    }
    Ok(StoreNotification {
        app_id,
        source: StoreSource::Apple,
        notification_id,
        notification_type,
        subtype,
        environment,
        transaction: read,
        payload: Value::Object(payload),
    })
}

/// `data.bundleId` and `data.environment` of an Apple notification, if it has them.
pub fn apple_bundle(notification: &Value) -> (Option<&str>, Option<&str>) {
    let data = notification.get("data");
    (
        data.and_then(|d| d.get("bundleId")).and_then(Value::as_str),
        data.and_then(|d| d.get("environment"))
            .and_then(Value::as_str),
    )
}

fn apple_transaction(
    t: &Value,
    notification_type: &str,
) -> Result<StoreTransaction, NotificationError> {
    const AT: &str = "/transaction";
    if !t.is_object() {
        return Err(wrong(AT, "the transaction must be an object"));
    }
    let transaction_id = text(t, AT, "transactionId")?;
    let original_transaction_id =
        optional_text(t, AT, "originalTransactionId")?.unwrap_or_else(|| transaction_id.clone());
    let purchased_at = millis(t, AT, "purchaseDate")?
        .ok_or_else(|| wrong(&format!("{AT}/purchaseDate"), "is missing"))?;
    let milliunits = match t.get("price") {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(other) => {
            return Err(wrong(
                &format!("{AT}/price"),
                format!(
                    "must be a number of milliunits, not {}",
                    crate::shown::shown(other)
                ),
            ))
        }
    };
    let price = price(milliunits / 1000.0, &format!("{AT}/price"))?;
    let currency = match optional_text(t, AT, "currency")? {
        Some(c) => currency(&c, &format!("{AT}/currency"))?,
        None if price > 0.0 => return Err(wrong(&format!("{AT}/currency"), "is missing")),
        None => String::new(),
    };
    let trial = t.get("offerType").and_then(Value::as_i64) == Some(1)
        && t.get("offerDiscountType").and_then(Value::as_str) == Some("FREE_TRIAL");
    let refunded = matches!(notification_type, "REFUND" | "REVOKE")
        || millis(t, AT, "revocationDate")?.is_some();
    // Apple's `appAccountToken` is a UUID the app chose: its canonical text is the user id.
    let user_id = optional_text(t, AT, "appAccountToken")?.map(|token| token.to_ascii_lowercase());
    Ok(StoreTransaction {
        user_id,
        transaction_id,
        original_transaction_id,
        product_id: optional_text(t, AT, "productId")?,
        purchased_at,
        price: if trial { 0.0 } else { price },
        currency,
        trial,
        refunded,
    })
}

/// Reads a RevenueCat webhook body (`{"api_version": "1.0", "event": {...}}`, D30).
///
/// The price is `price_in_purchased_currency` in `currency` when both are given, else `price`
/// in USD. A transaction starts a free trial when `period_type` is `TRIAL`; it is refunded by a
/// `CANCELLATION` whose `cancel_reason` is `CUSTOMER_SUPPORT`, whose price RevenueCat sends
/// negative: it is read as the amount refunded (a positive price, `refunded` set), so that the
/// refund merges with its purchase and lowers proceeds as an Apple `REFUND` does (D30; a
/// negative price on any other event is refused). Events without a transaction
/// (`TEST`, and any event without `transaction_id`) are stored and counted by nothing.
pub fn read_revenuecat(
    app_id: AppId,
    body: &Value,
) -> Result<StoreNotification, NotificationError> {
    let event = body
        .get("event")
        .filter(|e| e.is_object())
        .ok_or_else(|| wrong("/event", "must be an object"))?;
    const AT: &str = "/event";
    let notification_id = text(event, AT, "id")?;
    let notification_type = text(event, AT, "type")?;
    let environment = optional_text(event, AT, "environment")?;
    let transaction = match optional_text(event, AT, "transaction_id")? {
        None => None,
        Some(transaction_id) => {
            let purchased_at = millis(event, AT, "purchased_at_ms")?
                .ok_or_else(|| wrong(&format!("{AT}/purchased_at_ms"), "is missing"))?;
            let number = |name: &str| event.get(name).and_then(Value::as_f64);
            let (amount, code) = match (
                number("price_in_purchased_currency"),
                optional_text(event, AT, "currency")?,
            ) {
                (Some(amount), Some(code)) => (amount, currency(&code, &format!("{AT}/currency"))?),
                _ => (number("price").unwrap_or(0.0), "USD".to_owned()),
            };
            let trial = event.get("period_type").and_then(Value::as_str) == Some("TRIAL");
            let refunded = notification_type == "CANCELLATION"
                && event.get("cancel_reason").and_then(Value::as_str) == Some("CUSTOMER_SUPPORT");
            Some(StoreTransaction {
                user_id: optional_text(event, AT, "app_user_id")?,
                original_transaction_id: optional_text(event, AT, "original_transaction_id")?
                    .unwrap_or_else(|| transaction_id.clone()),
                transaction_id,
                product_id: optional_text(event, AT, "product_id")?,
                purchased_at,
                price: if trial {
                    0.0
                } else if refunded {
                    refund_price(amount, &format!("{AT}/price"))?
                } else {
                    price(amount, &format!("{AT}/price"))?
                },
                currency: code,
                trial,
                refunded,
            })
        }
    };
    Ok(StoreNotification {
        app_id,
        source: StoreSource::RevenueCat,
        notification_id,
        notification_type,
        subtype: None,
        environment,
        transaction,
        payload: event.clone(),
    })
}
