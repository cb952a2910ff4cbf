//! D22's counting, one user at a time: [`Folder`] takes each user's exposures and outcomes and
//! adds them up. The stores read the rows (an experiment's exposures in user order, the app's
//! outcome events) and fold them here, so the rules are written once for every store; the
//! in-memory store's [`aggregate`] groups a list of events the same way.

use std::collections::{BTreeMap, HashMap};

use time::{Date, OffsetDateTime, UtcOffset};

use super::report::{DailyCounts, ResultsData, ResultsQuery, VariantCounts};
use super::stats::VariantSums;
use crate::events::{AnalyticsEvent, EventType, NoFlowReason};
use crate::ids::{AppId, ExperimentId, VariantId};
use crate::store_notifications::StoreTransaction;

/// Whether `e` is an exposure event of some experiment (a `flow_open`, or a holdout
/// `resolve_no_flow`, carrying an experiment id as resolve serves it): that experiment.
fn exposure_of_any(e: &AnalyticsEvent) -> Option<ExperimentId> {
    let kind = match e.event_type {
        EventType::FlowOpen => true,
        EventType::ResolveNoFlow => e.reason == Some(NoFlowReason::Holdout),
        _ => false,
    };
    if !kind {
        return None;
    }
    // Only the canonical text resolve serves (lower-case, hyphenated) names an experiment.
    let text = e.experiment_id.as_deref()?;
    let id: ExperimentId = text.parse().ok()?;
    (id.to_string() == text).then_some(id)
}

/// What the experiment list counts (D22): per experiment of an app, the users a report
/// without a window counts as exposed (`exposed_users`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExposureCountQuery {
    /// The app.
    pub app_id: AppId,
    /// Its experiments, each with its variants (exposures to others are not exposures).
    pub experiments: Vec<(ExperimentId, Vec<VariantId>)>,
    /// Exposures up to then (a report's default end: now).
    pub to: OffsetDateTime,
}

/// Per experiment of `query`, the users a report counts as exposed (the list's figure): users
/// with an exposure to one of its variants up to the end, and to no other of its variants
/// (users of two are the report's `multiple_exposures`, in no figure). Experiments without such
/// a user are absent.
pub fn exposure_counts<'e>(
    query: &ExposureCountQuery,
    events: impl IntoIterator<Item = &'e AnalyticsEvent>,
) -> BTreeMap<ExperimentId, u64> {
    // Per experiment and user: the variant, or `None` once a second one was seen.
    let mut users: BTreeMap<(ExperimentId, &str), Option<&str>> = BTreeMap::new();
    for e in events {
        if e.app_id != query.app_id || e.occurred_at > query.to {
            continue;
        }
        let Some(experiment) = exposure_of_any(e) else {
            continue;
        };
        let Some(variant) = e.variant_id.as_deref() else {
            continue;
        };
        let known = query
            .experiments
            .iter()
            .find(|(id, _)| *id == experiment)
            .is_some_and(|(_, variants)| variants.iter().any(|v| v.to_string() == variant));
        if !known {
            continue;
        }
        users
            .entry((experiment, e.user_id.as_str()))
            .and_modify(|seen| {
                if *seen != Some(variant) {
                    *seen = None;
                }
            })
            .or_insert(Some(variant));
    }
    let mut counts = BTreeMap::new();
    for ((experiment, _), variant) in users {
        if variant.is_some() {
            *counts.entry(experiment).or_insert(0) += 1;
        }
    }
    counts
}

/// One exposure of a user: when, and to which variant (its place in the query's variants).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exposure {
    /// When.
    pub at: OffsetDateTime,
    /// The variant's index in [`ResultsQuery::variants`].
    pub variant: usize,
}

/// One event of a user that may count as an outcome: a conversion of a metric's type, or a
/// purchase with its revenue.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// When.
    pub at: OffsetDateTime,
    /// The event's type.
    pub event_type: EventType,
    /// For a `purchase_complete`: its `revenue` and `currency`, when it has both.
    pub revenue: Option<(f64, String)>,
}

/// Adds users up by D22's rules (`crate::results`): give it each user's exposures (up to the
/// report's end, of the query's variants) and outcomes (up to the end; any order), then
/// [`Folder::finish`].
#[derive(Debug)]
pub struct Folder<'q> {
    query: &'q ResultsQuery,
    data: ResultsData,
    daily: BTreeMap<(Date, usize), DailyCounts>,
    variants: Vec<VariantCounts>,
    /// A user's first conversion per metric, kept to be reused from user to user.
    firsts: Vec<Option<OffsetDateTime>>,
}

impl<'q> Folder<'q> {
    /// An empty count of `query`.
    pub fn new(query: &'q ResultsQuery) -> Self {
        let metrics = query.conversions.len();
        Self {
            query,
            data: ResultsData::default(),
            daily: BTreeMap::new(),
            variants: query
                .variants
                .iter()
                .map(|v| VariantCounts::new(*v, 0, vec![0; metrics], VariantSums::default()))
                .collect(),
            firsts: Vec::with_capacity(metrics),
        }
    }

    /// Adds one user: `exposures` (at least one) and `outcomes`, each up to the query's end.
    pub fn user(&mut self, exposures: &[Exposure], outcomes: &[Outcome]) {
        self.user_with(exposures, outcomes, &[]);
    }

    /// As [`Folder::user`], with the user's store transactions (D30; any order, one per
    /// notification: a transaction reported twice, bought then refunded, is one), counted
    /// when the query asks for store metrics.
    pub fn user_with(
        &mut self,
        exposures: &[Exposure],
        outcomes: &[Outcome],
        transactions: &[StoreTransaction],
    ) {
        let to = self.query.to;
        let Some(first) = exposures
            .iter()
            .filter(|x| x.at <= to && x.variant < self.variants.len())
            .min_by_key(|x| (x.at, x.variant))
            .copied()
        else {
            return;
        };
        // The report's users are those first exposed in the window.
        if self.query.from.is_some_and(|from| first.at < from) {
            return;
        }
        if exposures
            .iter()
            .any(|x| x.at <= to && x.variant < self.variants.len() && x.variant != first.variant)
        {
            self.data.multiple_exposures += 1;
            return;
        }
        let metrics = self.query.conversions.len();
        let mut firsts = std::mem::take(&mut self.firsts);
        firsts.clear();
        firsts.resize(metrics, None);
        let mut revenue = 0.0;
        for o in outcomes {
            if o.at < first.at || o.at > to {
                continue;
            }
            if let Some(i) = self
                .query
                .conversions
                .iter()
                .position(|t| *t == o.event_type)
            {
                firsts[i] = Some(firsts[i].map_or(o.at, |t| t.min(o.at)));
            }
            if o.event_type == EventType::PurchaseComplete {
                if let Some((amount, currency)) = &o.revenue {
                    match self.query.rate(currency) {
                        Some(rate) => revenue += amount * rate,
                        None => self.data.unconverted_purchases += 1,
                    }
                }
            }
        }
        if let Some(horizon) = self.query.store_horizon_days {
            // Saturating: a horizon past the last representable instant (year 9999) reaches
            // the report's end, whatever the configuration or the parameter held.
            let end = first
                .at
                .checked_add(time::Duration::days(i64::from(horizon)))
                .map_or(to, |end| end.min(to));
            let store = store_counts(first.at, end, transactions, self.query);
            let counts = &mut self.variants[first.variant].store;
            counts.trial_started += u64::from(store.trial_started);
            counts.trial_converted += u64::from(store.trial_converted);
            counts.paid += u64::from(store.paid);
            counts.refunded += u64::from(store.refunded);
            counts.proceeds.users += 1;
            counts.proceeds.sum += store.proceeds;
            counts.proceeds.sum_squares += store.proceeds * store.proceeds;
            self.data.unconverted_purchases += store.unconverted;
        }
        let counts = &mut self.variants[first.variant];
        counts.users += 1;
        counts.revenue.users += 1;
        counts.revenue.sum += revenue;
        counts.revenue.sum_squares += revenue * revenue;
        self.data.first_exposure = Some(
            self.data
                .first_exposure
                .map_or(first.at, |t| t.min(first.at)),
        );
        let (variant, variant_id) = (first.variant, counts.variant_id);
        day(&mut self.daily, first.at, variant, variant_id, metrics).users += 1;
        for (i, at) in firsts.iter().enumerate() {
            if let Some(at) = at {
                day(&mut self.daily, *at, variant, variant_id, metrics).conversions[i] += 1;
                self.variants[variant].conversions[i] += 1;
            }
        }
        self.firsts = firsts;
    }

    /// The counts.
    pub fn finish(mut self) -> ResultsData {
        self.data.variants = self.variants;
        self.data.daily = self.daily.into_values().collect();
        self.data
    }
}

/// One user's store figures (D30).
#[derive(Default)]
struct UserStore {
    trial_started: bool,
    trial_converted: bool,
    paid: bool,
    refunded: bool,
    proceeds: f64,
    unconverted: u64,
}

/// One user's store figures from `transactions` bought from `start` to `end` (both inclusive):
/// each transaction once (its notifications merged: refunded if any says so), a trial converted
/// by a paid transaction of the same subscription bought after it, proceeds the paid prices
/// less the refunded ones in the reporting currency (a price without a rate left out and
/// counted).
fn store_counts(
    start: OffsetDateTime,
    end: OffsetDateTime,
    transactions: &[StoreTransaction],
    query: &ResultsQuery,
) -> UserStore {
    let mut merged: BTreeMap<&str, StoreTransaction> = BTreeMap::new();
    for t in transactions {
        if t.purchased_at < start || t.purchased_at > end {
            continue;
        }
        merged
            .entry(t.transaction_id.as_str())
            .and_modify(|m| {
                m.refunded |= t.refunded;
                m.trial |= t.trial;
                if m.currency.is_empty() {
                    m.currency.clone_from(&t.currency);
                }
                m.price = m.price.max(t.price);
                m.purchased_at = m.purchased_at.min(t.purchased_at);
            })
            .or_insert_with(|| t.clone());
    }
    let mut user = UserStore::default();
    let trials: Vec<&StoreTransaction> = merged.values().filter(|t| t.trial).collect();
    user.trial_started = !trials.is_empty();
    for t in merged.values().filter(|t| !t.trial && t.price > 0.0) {
        user.paid = true;
        user.trial_converted |= trials.iter().any(|trial| {
            trial.original_transaction_id == t.original_transaction_id
                && trial.purchased_at < t.purchased_at
        });
        match query.rate(&t.currency) {
            Some(rate) => {
                let amount = t.price * rate;
                user.proceeds += amount;
                if t.refunded {
                    user.refunded = true;
                    user.proceeds -= amount;
                }
            }
            None => {
                user.refunded |= t.refunded;
                user.unconverted += 1;
            }
        }
    }
    user
}

/// The daily counts of `variant` on the UTC day of `at`.
fn day(
    daily: &mut BTreeMap<(Date, usize), DailyCounts>,
    at: OffsetDateTime,
    variant: usize,
    variant_id: crate::ids::VariantId,
    metrics: usize,
) -> &mut DailyCounts {
    let date = at.to_offset(UtcOffset::UTC).date();
    daily
        .entry((date, variant))
        .or_insert_with(|| DailyCounts::new(date, variant_id, 0, vec![0; metrics]))
}

/// The exposure `e` makes for `query`, if it is one: an exposure event of the app carrying
/// the experiment and one of its variants, up to the report's end.
fn exposure(query: &ResultsQuery, e: &AnalyticsEvent) -> Option<Exposure> {
    if e.app_id != query.app_id || e.occurred_at > query.to {
        return None;
    }
    if exposure_of_any(e) != Some(query.experiment_id) {
        return None;
    }
    let variant = e.variant_id.as_deref()?;
    let index = query
        .variants
        .iter()
        .position(|v| v.to_string() == variant)?;
    Some(Exposure {
        at: e.occurred_at,
        variant: index,
    })
}

/// The outcome `e` is for `query`, if it may be one: an event of the app, up to the end, of a
/// conversion's type or a purchase.
fn outcome(query: &ResultsQuery, e: &AnalyticsEvent) -> Option<Outcome> {
    if e.app_id != query.app_id || e.occurred_at > query.to {
        return None;
    }
    let purchase = e.event_type == EventType::PurchaseComplete;
    if !purchase && !query.conversions.contains(&e.event_type) {
        return None;
    }
    let revenue = purchase
        .then(|| {
            let amount = e.payload.get("revenue")?.as_f64()?;
            let currency = e.payload.get("currency")?.as_str()?;
            Some((amount, currency.to_owned()))
        })
        .flatten();
    Some(Outcome {
        at: e.occurred_at,
        event_type: e.event_type,
        revenue,
    })
}

/// D22's counts of `query` over a list of events (the in-memory store's answer).
pub fn aggregate<'e>(
    query: &ResultsQuery,
    events: impl IntoIterator<Item = &'e AnalyticsEvent> + Clone,
) -> ResultsData {
    aggregate_with(query, events, &[])
}

/// As [`aggregate`], with the app's store transactions (D30; those of other apps are the
/// caller's to leave out).
pub fn aggregate_with<'e>(
    query: &ResultsQuery,
    events: impl IntoIterator<Item = &'e AnalyticsEvent> + Clone,
    transactions: &[StoreTransaction],
) -> ResultsData {
    // Ordered by user, so the sums add up in the same order every time.
    let mut exposures: BTreeMap<&str, Vec<Exposure>> = BTreeMap::new();
    for e in events.clone() {
        if let Some(x) = exposure(query, e) {
            exposures.entry(e.user_id.as_str()).or_default().push(x);
        }
    }
    let mut outcomes: HashMap<&str, Vec<Outcome>> = HashMap::new();
    for e in events {
        if !exposures.contains_key(e.user_id.as_str()) {
            continue;
        }
        if let Some(o) = outcome(query, e) {
            outcomes.entry(e.user_id.as_str()).or_default().push(o);
        }
    }
    let mut bought: HashMap<&str, Vec<StoreTransaction>> = HashMap::new();
    for t in transactions {
        if let Some(user) = t.user_id.as_deref() {
            if exposures.contains_key(user) {
                bought.entry(user).or_default().push(t.clone());
            }
        }
    }
    let mut folder = Folder::new(query);
    for (user, xs) in &exposures {
        folder.user_with(
            xs,
            outcomes.get(user).map_or(&[][..], Vec::as_slice),
            bought.get(user).map_or(&[][..], Vec::as_slice),
        );
    }
    folder.finish()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use time::macros::datetime;
    use uuid::Uuid;

    use super::*;
    use crate::results::Method;

    /// Issue 65: the store horizon is added to a user's first exposure; a horizon that reaches
    /// past the year 9999 (`stores.horizon_days = 4294967295`) counts up to the report's end
    /// instead of panicking, and the transactions within it are counted.
    #[test]
    fn a_horizon_beyond_the_calendar_counts_up_to_the_end() {
        let to = datetime!(2026-12-07 00:00 UTC);
        let exposed = datetime!(2026-12-01 00:00 UTC);
        for horizon in [u32::MAX, 3650, 30] {
            let query = ResultsQuery {
                app_id: AppId::from_uuid(Uuid::from_u128(1)),
                experiment_id: ExperimentId::from_uuid(Uuid::from_u128(2)),
                variants: vec![VariantId::from_uuid(Uuid::from_u128(3))],
                from: None,
                to,
                conversions: vec![EventType::FlowComplete, EventType::PurchaseComplete],
                currency: "USD".to_owned(),
                exchange_rates: BTreeMap::new(),
                method: Method::FixedHorizon,
                store_horizon_days: Some(horizon),
            };
            let mut bought =
                StoreTransaction::bought("t1".to_owned(), exposed + time::Duration::days(2));
            bought.price = 9.99;
            bought.currency = "USD".to_owned();
            let mut folder = Folder::new(&query);
            folder.user_with(
                &[Exposure {
                    at: exposed,
                    variant: 0,
                }],
                &[],
                &[bought],
            );
            let data = folder.finish();
            assert_eq!(data.variants[0].users, 1, "horizon {horizon}");
            assert_eq!(data.variants[0].store.paid, 1, "horizon {horizon}");
        }
    }
}
