//! [`NotificationStore`] on [`Store`] (D30): store notifications in `store_notifications`, one
//! row per app, source and notification id, and the results' read of an app's transactions.
//!
//! A notification is one row inserted with `ON CONFLICT DO NOTHING`: a replay (the stores
//! retry until answered 200) changes nothing, and the answer says whether the row is new.

use std::collections::HashMap;

use diesel::prelude::*;
use flowgate_domain::ports::{BoxFuture, NotificationStore, StoreError};
use flowgate_domain::results::ResultsQuery;
use flowgate_domain::store_notifications::{StoreNotification, StoreTransaction, FORMAT};
use time::OffsetDateTime;

use crate::schema::store_notifications as notes;
use crate::store::Store;
use crate::types::{DbTimestamp, DbUuid};

/// A notification as stored.
#[derive(Insertable)]
#[diesel(table_name = notes, treat_none_as_default_value = false)]
struct Row {
    app_id: DbUuid,
    source: &'static str,
    notification_id: String,
    format: i32,
    notification_type: String,
    subtype: Option<String>,
    environment: Option<String>,
    user_id: Option<String>,
    transaction_id: Option<String>,
    original_transaction_id: Option<String>,
    product_id: Option<String>,
    purchased_at: Option<DbTimestamp>,
    price: Option<f64>,
    currency: Option<String>,
    trial: bool,
    refunded: bool,
    payload: String,
    received_at: DbTimestamp,
}

/// PostgreSQL's `text` cannot hold NUL; a store's strings might.
fn storable(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

impl Row {
    fn new(n: &StoreNotification, now: OffsetDateTime) -> Self {
        let t = n.transaction.as_ref();
        let text = |s: Option<&String>| s.map(|s| storable(s));
        Self {
            app_id: DbUuid(*n.app_id.as_uuid()),
            source: n.source.as_str(),
            notification_id: storable(&n.notification_id),
            format: FORMAT as i32,
            notification_type: storable(&n.notification_type),
            subtype: text(n.subtype.as_ref()),
            environment: text(n.environment.as_ref()),
            user_id: text(t.and_then(|t| t.user_id.as_ref())),
            transaction_id: text(t.map(|t| &t.transaction_id)),
            original_transaction_id: text(t.map(|t| &t.original_transaction_id)),
            product_id: text(t.and_then(|t| t.product_id.as_ref())),
            purchased_at: t.map(|t| DbTimestamp(t.purchased_at)),
            price: t.map(|t| t.price),
            currency: t.map(|t| t.currency.clone()),
            trial: t.is_some_and(|t| t.trial),
            refunded: t.is_some_and(|t| t.refunded),
            payload: storable(&n.payload.to_string()),
            received_at: DbTimestamp(now),
        }
    }
}

impl NotificationStore for Store {
    fn record_notification<'a>(
        &'a self,
        notification: &'a StoreNotification,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let row = Row::new(notification, OffsetDateTime::now_utc());
            let inserted = self
                .db()
                .run(
                    diesel::insert_into(notes::table)
                        .values(&row)
                        .on_conflict_do_nothing(),
                )
                .await?;
            Ok(inserted == 1)
        })
    }
}

/// One transaction row of the results' read.
#[derive(Queryable)]
struct TransactionRow {
    user_id: Option<String>,
    transaction_id: Option<String>,
    original_transaction_id: Option<String>,
    purchased_at: Option<DbTimestamp>,
    price: Option<f64>,
    currency: Option<String>,
    trial: bool,
    refunded: bool,
}

impl Store {
    /// The app's store transactions a report of `query` may count (D30), by user: those
    /// bought from the window's start to its end, of users the app named. Empty when the query
    /// asks for no store metrics.
    pub(crate) async fn store_transactions(
        &self,
        query: &ResultsQuery,
    ) -> Result<HashMap<String, Vec<StoreTransaction>>, StoreError> {
        let mut by_user: HashMap<String, Vec<StoreTransaction>> = HashMap::new();
        if query.store_horizon_days.is_none() {
            return Ok(by_user);
        }
        let from = DbTimestamp(query.from.unwrap_or(OffsetDateTime::UNIX_EPOCH));
        let rows: Vec<TransactionRow> = self
            .db()
            .rows(
                notes::table
                    .filter(notes::app_id.eq(DbUuid(*query.app_id.as_uuid())))
                    .filter(notes::user_id.is_not_null())
                    .filter(notes::transaction_id.is_not_null())
                    .filter(notes::purchased_at.ge(from))
                    .filter(notes::purchased_at.le(DbTimestamp(query.to)))
                    .select((
                        notes::user_id,
                        notes::transaction_id,
                        notes::original_transaction_id,
                        notes::purchased_at,
                        notes::price,
                        notes::currency,
                        notes::trial,
                        notes::refunded,
                    )),
            )
            .await?;
        for r in rows {
            let (Some(user), Some(transaction_id), Some(at)) =
                (r.user_id, r.transaction_id, r.purchased_at)
            else {
                continue;
            };
            let mut t = StoreTransaction::bought(transaction_id, at.0);
            if let Some(original) = r.original_transaction_id {
                t.original_transaction_id = original;
            }
            t.user_id = Some(user.clone());
            t.price = r.price.unwrap_or(0.0);
            t.currency = r.currency.unwrap_or_default();
            t.trial = r.trial;
            t.refunded = r.refunded;
            by_user.entry(user).or_default().push(t);
        }
        Ok(by_user)
    }
}
