//! [`ResultsSource`] contract (D22): hand-made events whose counts are known, appended through
//! the [`EventStore`] and aggregated back. The experiment is the catalog fixture's
//! `paywall-test` of app 1 (variants `control`, a holdout, and `new`).
//!
//! What is checked: exposures by `flow_open` and by a holdout `resolve_no_flow`; the first
//! exposure starting the observation (events before it not counted); users exposed to two
//! variants left out and counted; other apps', other experiments' and unknown variants' events
//! ignored; conversions per metric, the default ones and one asked for; revenue converted by
//! the rates, a purchase without a rate counted apart; the window inclusive at both ends; the
//! daily counts.
// Cases panic on failure by design: a broken fixture is a broken test.
#![allow(clippy::expect_used)]

use std::collections::BTreeMap;

use flowgate_domain::catalog::Experiment;
use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType, NoFlowReason};
use flowgate_domain::ids::{AppId, EventId, ExperimentId, FlowId, FlowVersionId, VariantId};
use flowgate_domain::ports::{EventStore, ResultsSource};
use flowgate_domain::results::{
    DailyCounts, ExposureCountQuery, ResultsData, ResultsQuery, VariantSums,
};
use flowgate_domain::Platform;
use time::macros::{date, datetime};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use crate::fixtures::catalogs::{self, APP1, APP2, EXP, EXP_PAUSED, VAR_CONTROL, VAR_NEW};

const T0: OffsetDateTime = datetime!(2026-11-20 10:00:00 UTC);

fn uuid(text: &str) -> Uuid {
    text.parse().expect("a fixture id")
}

fn control() -> VariantId {
    VariantId::from_uuid(uuid(VAR_CONTROL))
}

fn new() -> VariantId {
    VariantId::from_uuid(uuid(VAR_NEW))
}

/// Runs `f` with the fixture's experiment and its app.
fn with_experiment<T>(f: impl FnOnce(AppId, &Experiment) -> T) -> T {
    let catalog = catalogs::build(&catalogs::catalog_json());
    let (app, experiment) = catalog
        .experiment(ExperimentId::from_uuid(uuid(EXP)))
        .expect("the fixture's experiment");
    f(app.id(), experiment)
}

fn query(
    from: Option<OffsetDateTime>,
    to: OffsetDateTime,
    extra: &[EventType],
    rates: &[(&str, f64)],
) -> ResultsQuery {
    with_experiment(|app, experiment| {
        ResultsQuery::new(
            app,
            experiment,
            from,
            to,
            extra,
            "USD",
            rates
                .iter()
                .map(|(c, r)| ((*c).to_owned(), *r))
                .collect::<BTreeMap<_, _>>(),
        )
    })
}

/// Builds the events of one test, each with a fresh id.
#[derive(Default)]
struct Events(Vec<AnalyticsEvent>);

impl Events {
    fn push(
        &mut self,
        user: &str,
        event_type: EventType,
        at: OffsetDateTime,
    ) -> &mut AnalyticsEvent {
        let n = self.0.len() as u128 + 1;
        self.0.push(
            AnalyticsEvent::new(
                EventId::from_uuid(Uuid::from_u128(
                    0x7000_0000_0000_4000_8000_0000_0000_0000 | n,
                )),
                EventSource::Sdk,
                event_type,
                AppId::from_uuid(uuid(APP1)),
                user.to_owned(),
                format!("s-{user}"),
                Platform::Ios,
                at,
            )
            .with_flow_id(Some(FlowId::from_uuid(uuid(catalogs::FLOW_NEW))))
            .with_flow_version_id(Some(FlowVersionId::from_uuid(uuid(catalogs::V_NEW_1))))
            .with_placement_key(Some("paywall".to_owned()))
            .with_sdk_version(Some("1.0.0".to_owned())),
        );
        self.0.last_mut().expect("just pushed")
    }

    /// `flow_open` of `variant` of the experiment.
    fn open(&mut self, user: &str, variant: VariantId, at: OffsetDateTime) -> &mut AnalyticsEvent {
        let e = self.push(user, EventType::FlowOpen, at);
        e.experiment_id = Some(EXP.to_owned());
        e.variant_id = Some(variant.to_string());
        e
    }

    /// The server's holdout `resolve_no_flow` for `variant`.
    fn holdout(&mut self, user: &str, variant: VariantId, at: OffsetDateTime) {
        let e = self.push(user, EventType::ResolveNoFlow, at);
        e.source = EventSource::Server;
        e.flow_id = None;
        e.flow_version_id = None;
        e.sdk_version = None;
        e.reason = Some(NoFlowReason::Holdout);
        e.experiment_id = Some(EXP.to_owned());
        e.variant_id = Some(variant.to_string());
    }

    fn purchase(&mut self, user: &str, revenue: f64, currency: &str, at: OffsetDateTime) {
        let e = self.push(user, EventType::PurchaseComplete, at);
        e.payload
            .insert("revenue".to_owned(), serde_json::json!(revenue));
        e.payload
            .insert("currency".to_owned(), serde_json::json!(currency));
    }
}

async fn results<S: EventStore + ResultsSource + ?Sized>(
    store: &S,
    events: &Events,
    query: &ResultsQuery,
) -> ResultsData {
    if !events.0.is_empty() {
        if let Err(e) = store.append_events(&events.0).await {
            panic!("append_events: {e}");
        }
    }
    let mut data = match store.experiment_results(query).await {
        Ok(data) => data,
        Err(e) => panic!("experiment_results: {e}"),
    };
    data.variants.sort_by_key(|v| v.variant_id);
    data.daily.sort_by_key(|d| (d.date, d.variant_id));
    data
}

fn sums(values: &[f64]) -> VariantSums {
    VariantSums {
        users: values.len() as u64,
        sum: values.iter().sum(),
        sum_squares: values.iter().map(|v| v * v).sum(),
    }
}

#[track_caller]
fn assert_revenue(ours: VariantSums, expected: VariantSums, variant: &str) {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(
        ours.users == expected.users
            && close(ours.sum, expected.sum)
            && close(ours.sum_squares, expected.sum_squares),
        "{variant} revenue: {ours:?}, expected {expected:?}"
    );
}

/// Users, conversions (`flow_complete`, `purchase_complete`) and revenue per variant; events
/// before a user's first exposure, users of two variants, other apps' and other experiments'
/// exposures, unknown variants and currencies without a rate handled as D22 says.
pub async fn exposures_conversions_and_revenue_per_variant<S>(store: &S)
where
    S: EventStore + ResultsSource + ?Sized,
{
    let h = Duration::hours(1);
    let mut ev = Events::default();
    // control: u1 converts on both metrics; u3 is exposed by the server's holdout event.
    ev.open("u1", control(), T0);
    ev.push("u1", EventType::FlowComplete, T0 + h);
    ev.purchase("u1", 9.99, "USD", T0 + 2 * h);
    ev.holdout("u3", control(), T0 + Duration::days(1));
    // new: u2's flow_complete came before its exposure; its purchase is in EUR.
    ev.push("u2", EventType::FlowComplete, T0 - h);
    ev.open("u2", new(), T0);
    ev.purchase("u2", 20.0, "EUR", T0 + h);
    // u4: exposed twice (the first counts), converts exactly at its first exposure.
    ev.open("u4", new(), T0 + 2 * h);
    ev.open("u4", new(), T0 + h);
    ev.push("u4", EventType::FlowComplete, T0 + h);
    ev.purchase("u4", 5.0, "USD", T0 + 90 * Duration::MINUTE);
    // u8: one purchase without a rate (left out, counted), one in USD.
    ev.open("u8", new(), T0);
    ev.purchase("u8", 1_000.0, "JPY", T0 + h);
    ev.purchase("u8", 3.0, "USD", T0 + h);
    // u5 saw both variants: left out, counted.
    ev.open("u5", control(), T0);
    ev.open("u5", new(), T0 + h);
    ev.purchase("u5", 100.0, "USD", T0 + 2 * h);
    // Not exposures of this experiment: another experiment, another app, an unknown variant,
    // a flow event that is not flow_open, a resolve_no_flow that is not a holdout.
    ev.open("u6", control(), T0).experiment_id = Some(EXP_PAUSED.to_owned());
    ev.open("u7", control(), T0).app_id = AppId::from_uuid(uuid(APP2));
    ev.open("u9", control(), T0).variant_id = Some(Uuid::from_u128(9).to_string());
    let screen = ev.push("u10", EventType::ScreenView, T0);
    screen.experiment_id = Some(EXP.to_owned());
    screen.variant_id = Some(control().to_string());
    ev.holdout("u11", control(), T0);
    ev.0.last_mut().expect("u11").reason = Some(NoFlowReason::NoRuleMatched);
    for user in ["u6", "u7", "u9", "u10", "u11"] {
        ev.purchase(user, 50.0, "USD", T0 + 2 * h);
    }
    let q = query(None, T0 + Duration::days(2), &[], &[("EUR", 1.1)]);
    let data = results(store, &ev, &q).await;
    let counts: Vec<(VariantId, u64, Vec<u64>)> = data
        .variants
        .iter()
        .map(|v| (v.variant_id, v.users, v.conversions.clone()))
        .collect();
    let mut expected = vec![(control(), 2, vec![1, 1]), (new(), 3, vec![1, 3])];
    expected.sort_by_key(|e| e.0);
    assert_eq!(counts, expected);
    let revenue = |id: VariantId| {
        data.variants
            .iter()
            .find(|v| v.variant_id == id)
            .map(|v| v.revenue)
            .unwrap_or_default()
    };
    assert_revenue(revenue(control()), sums(&[9.99, 0.0]), "control");
    assert_revenue(revenue(new()), sums(&[22.0, 5.0, 3.0]), "new");
    assert_eq!(data.multiple_exposures, 1);
    assert_eq!(data.unconverted_purchases, 1);
    assert_eq!(data.first_exposure, Some(T0));
}

/// The window selects users by their first exposure, inclusive at both ends: first exposed
/// exactly at `from` or at `to`, in; a microsecond before `from` (even if exposed again inside)
/// or after `to`, out; a second variant seen after `to` does not make a multiple exposure;
/// outcomes count up to `to` inclusive.
pub async fn the_window_is_inclusive_and_outcomes_stop_at_its_end<S>(store: &S)
where
    S: EventStore + ResultsSource + ?Sized,
{
    let (from, to) = (T0, T0 + Duration::days(3));
    let us = Duration::microseconds(1);
    let mut ev = Events::default();
    ev.open("at-from", control(), from);
    ev.push("at-from", EventType::FlowComplete, to);
    ev.purchase("at-from", 2.5, "USD", to);
    ev.open("at-to", new(), to);
    ev.open("before", control(), from - us);
    ev.open("after", new(), to + us);
    ev.open("before", control(), from + Duration::hours(1));
    ev.open("late-outcome", new(), from);
    ev.push("late-outcome", EventType::FlowComplete, to + us);
    ev.purchase("late-outcome", 7.0, "USD", to + us);
    ev.open("at-to", control(), to + us);
    let data = results(store, &ev, &query(Some(from), to, &[], &[])).await;
    let users: Vec<(VariantId, u64, Vec<u64>)> = data
        .variants
        .iter()
        .map(|v| (v.variant_id, v.users, v.conversions.clone()))
        .collect();
    let mut expected = vec![(control(), 1, vec![1, 1]), (new(), 2, vec![0, 0])];
    expected.sort_by_key(|e| e.0);
    assert_eq!(users, expected);
    let control_revenue = data
        .variants
        .iter()
        .find(|v| v.variant_id == control())
        .map(|v| v.revenue)
        .unwrap_or_default();
    assert_revenue(control_revenue, sums(&[2.5]), "control");
    assert_eq!(data.first_exposure, Some(from));
    assert_eq!(data.multiple_exposures, 0);
}

/// Per UTC day and variant: the users first exposed that day, and the users whose first
/// qualifying conversion was that day; a metric asked for is counted like the defaults.
pub async fn daily_counts_and_a_metric_asked_for<S>(store: &S)
where
    S: EventStore + ResultsSource + ?Sized,
{
    let day = Duration::days(1);
    let mut ev = Events::default();
    ev.open("a", control(), T0);
    ev.push("a", EventType::ScreenView, T0 + day);
    ev.push("a", EventType::ScreenView, T0 + 2 * day);
    ev.open("b", control(), T0 + day);
    ev.push("b", EventType::FlowComplete, T0 + day);
    ev.open("c", new(), T0 + 2 * day);
    ev.push("c", EventType::ScreenView, T0 + 2 * day);
    // Exposed on day 1 again: the first exposure's day counts.
    ev.open("c", new(), T0 + 3 * day);
    let q = query(None, T0 + 5 * day, &[EventType::ScreenView], &[]);
    let data = results(store, &ev, &q).await;
    let mut expected = vec![
        DailyCounts::new(date!(2026 - 11 - 20), control(), 1, vec![0, 0, 0]),
        DailyCounts::new(date!(2026 - 11 - 21), control(), 1, vec![1, 0, 1]),
        DailyCounts::new(date!(2026 - 11 - 22), new(), 1, vec![0, 0, 1]),
    ];
    expected.sort_by_key(|d| (d.date, d.variant_id));
    assert_eq!(data.daily, expected);
    let screen_views: Vec<(VariantId, u64)> = data
        .variants
        .iter()
        .map(|v| (v.variant_id, v.conversions[2]))
        .collect();
    let mut expected = vec![(control(), 1), (new(), 1)];
    expected.sort_by_key(|e| e.0);
    assert_eq!(screen_views, expected);
}

/// User ids whose order differs between their bytes and a language's (case, accents, spaces,
/// digits): each user's events are joined to that user's exposure, whatever order a store
/// reads them in.
pub async fn user_ids_in_any_order_are_joined_to_their_own_events<S>(store: &S)
where
    S: EventStore + ResultsSource + ?Sized,
{
    let h = Duration::HOUR;
    let mut ev = Events::default();
    let users = [
        "Zoë", "alice", "Émile", "émile", "a b", "ab", "a-b", "10", "9", "Bob", "bob", "ß",
    ];
    // Every second user is in the new variant; users 0, 3, 4, 7 and 10 complete the flow;
    // users 1 and 6 buy; user 11 completes before being exposed (not counted).
    for (i, user) in users.iter().enumerate() {
        let variant = if i % 2 == 0 { control() } else { new() };
        ev.open(user, variant, T0);
    }
    for i in [0, 3, 4, 7, 10] {
        ev.push(users[i], EventType::FlowComplete, T0 + h);
    }
    ev.purchase(users[1], 2.0, "USD", T0 + h);
    ev.purchase(users[6], 7.0, "USD", T0 + h);
    ev.push(users[11], EventType::FlowComplete, T0 - h);
    let data = results(store, &ev, &query(None, T0 + Duration::days(1), &[], &[])).await;
    let counts: Vec<(VariantId, u64, Vec<u64>)> = data
        .variants
        .iter()
        .map(|v| (v.variant_id, v.users, v.conversions.clone()))
        .collect();
    // control: users 0, 2, 4, 6, 8, 10 (completions 0, 4, 10; purchase 6);
    // new: 1, 3, 5, 7, 9, 11 (completions 3, 7; purchase 1).
    let mut expected = vec![(control(), 6, vec![3, 1]), (new(), 6, vec![2, 1])];
    expected.sort_by_key(|e| e.0);
    assert_eq!(counts, expected);
    let revenue = |id: VariantId| {
        data.variants
            .iter()
            .find(|v| v.variant_id == id)
            .map(|v| v.revenue)
            .unwrap_or_default()
    };
    assert_revenue(
        revenue(control()),
        sums(&[0.0, 0.0, 0.0, 7.0, 0.0, 0.0]),
        "control",
    );
    assert_revenue(revenue(new()), sums(&[2.0, 0.0, 0.0, 0.0, 0.0, 0.0]), "new");
}

/// No exposure: nothing counted, no error.
pub async fn an_experiment_without_exposures_has_no_counts<S>(store: &S)
where
    S: EventStore + ResultsSource + ?Sized,
{
    let mut ev = Events::default();
    ev.push("u", EventType::FlowComplete, T0);
    let data = results(store, &ev, &query(None, T0 + Duration::days(1), &[], &[])).await;
    assert!(data.variants.iter().all(|v| v.users == 0), "{data:?}");
    assert_eq!(
        (
            data.multiple_exposures,
            data.unconverted_purchases,
            data.first_exposure
        ),
        (0, 0, None)
    );
    assert!(data.daily.is_empty());
}

/// Per experiment of an app, the users the experiment list shows: those a report without a
/// window counts as exposed (`exposed_users`), so the list and the report agree (issue 49: an
/// exposure naming an unknown variant was counted in the list, not in the report). Exposures
/// to another experiment's or an unknown variant, after the end, of another app, non-exposure
/// events and ids not written as resolve serves them are not counted; users of two variants
/// are left out, as the report leaves them out (`multiple_exposures`).
pub async fn exposure_counts_per_experiment<S>(store: &S)
where
    S: EventStore + ResultsSource + ?Sized,
{
    let to = T0 + Duration::days(1);
    let unknown = VariantId::from_uuid(uuid("60000000-0000-4000-8000-0000000000ff"));
    let mut ev = Events::default();
    ev.open("u1", control(), T0);
    ev.open("u1", new(), T0 + Duration::hours(1));
    ev.holdout("u2", control(), T0 - Duration::days(100));
    let paused = ev.open("u3", control(), T0);
    paused.experiment_id = Some(EXP_PAUSED.to_owned());
    paused.variant_id = Some(catalogs::VAR_PAUSED.to_owned());
    // The paused experiment's exposure naming the running one's variant: not its variant.
    ev.open("u3b", new(), T0).experiment_id = Some(EXP_PAUSED.to_owned());
    ev.open("u4", control(), T0).app_id = AppId::from_uuid(uuid(APP2));
    let screen = ev.push("u5", EventType::ScreenView, T0);
    screen.experiment_id = Some(EXP.to_owned());
    ev.open("u6", control(), T0).experiment_id = Some(EXP.replace('-', ""));
    // Only an unknown variant: not exposed.
    ev.open("u7", unknown, T0);
    // A known variant and an unknown one: exposed to the known one.
    ev.open("u8", new(), T0);
    ev.open("u8", unknown, T0 + Duration::hours(1));
    // After the end.
    ev.open("u9", new(), to + Duration::seconds(1));
    if let Err(e) = store.append_events(&ev.0).await {
        panic!("append_events: {e}");
    }
    let catalog = catalogs::build(&catalogs::catalog_json());
    let app = AppId::from_uuid(uuid(APP1));
    let experiments = [EXP, EXP_PAUSED]
        .iter()
        .map(|id| {
            let id = ExperimentId::from_uuid(uuid(id));
            let (_, experiment) = catalog.experiment(id).expect("the fixture's experiment");
            (id, experiment.variants().iter().map(|v| v.id()).collect())
        })
        .collect();
    let listed = ExposureCountQuery {
        app_id: app,
        experiments,
        to,
    };
    let counts = match store.exposure_counts(&listed).await {
        Ok(counts) => counts,
        Err(e) => panic!("exposure_counts: {e}"),
    };
    let expected: BTreeMap<ExperimentId, u64> = [
        (ExperimentId::from_uuid(uuid(EXP)), 2),
        (ExperimentId::from_uuid(uuid(EXP_PAUSED)), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, expected);
    // The report counts the same users.
    let report = match store.experiment_results(&query(None, to, &[], &[])).await {
        Ok(data) => data,
        Err(e) => panic!("experiment_results: {e}"),
    };
    let exposed: u64 = report.variants.iter().map(|v| v.users).sum();
    assert_eq!(exposed, 2, "the report's exposed users: {report:?}");
    assert_eq!(report.multiple_exposures, 1, "u1");
}

/// A RevenueCat notification of `user`'s transaction, read as the route reads it; a free one
/// starts a trial.
fn store_note(
    app: &str,
    id: &str,
    user: &str,
    transaction: (&str, &str),
    at: OffsetDateTime,
    price: f64,
    kind: &str,
) -> flowgate_domain::store_notifications::StoreNotification {
    // A free transaction is a trial's start.
    let trial = price == 0.0;
    let body = serde_json::json!({"api_version": "1.0", "event": {
        "id": id, "type": kind, "app_user_id": user, "cancel_reason": "CUSTOMER_SUPPORT",
        "transaction_id": transaction.0, "original_transaction_id": transaction.1,
        "purchased_at_ms": at.unix_timestamp() * 1000,
        "period_type": if trial { "TRIAL" } else { "NORMAL" },
        "price_in_purchased_currency": price, "currency": "EUR"}});
    flowgate_domain::store_notifications::read_revenuecat(AppId::from_uuid(uuid(app)), &body)
        .expect("a readable notification")
}

/// D30: a notification is stored once per app, source and id (a replay changes nothing, the
/// same id in another app is another notification), and the store metrics count what was
/// stored for the experiment's exposed users: a trial converted, a refund, proceeds in the
/// reporting currency, nothing of other apps, unexposed users or past the horizon.
pub async fn store_notifications_are_stored_once_and_counted<S>(store: &S)
where
    S: EventStore + ResultsSource + flowgate_domain::ports::NotificationStore + ?Sized,
{
    let day = Duration::days(1);
    let notes = [
        store_note(
            APP1,
            "n1",
            "u1",
            ("t1", "o1"),
            T0 + day,
            0.0,
            "INITIAL_PURCHASE",
        ),
        store_note(
            APP1,
            "n2",
            "u1",
            ("t2", "o1"),
            T0 + day * 8,
            10.0,
            "RENEWAL",
        ),
        store_note(
            APP1,
            "n3",
            "u2",
            ("t3", "o3"),
            T0 + day,
            20.0,
            "INITIAL_PURCHASE",
        ),
        store_note(
            APP1,
            "n4",
            "u2",
            ("t3", "o3"),
            T0 + day * 2,
            20.0,
            "CANCELLATION",
        ),
        // Past the 30-day horizon, another app's, a user never exposed.
        store_note(
            APP1,
            "n5",
            "u3",
            ("t5", "o5"),
            T0 + day * 40,
            50.0,
            "RENEWAL",
        ),
        store_note(APP2, "n6", "u3", ("t6", "o6"), T0 + day, 50.0, "RENEWAL"),
        store_note(
            APP1,
            "n7",
            "nobody",
            ("t7", "o7"),
            T0 + day,
            50.0,
            "RENEWAL",
        ),
    ];
    for n in &notes {
        assert_eq!(
            store.record_notification(n).await,
            Ok(true),
            "{}",
            n.notification_id
        );
    }
    // A replay: stored already, nothing new.
    assert_eq!(store.record_notification(&notes[1]).await, Ok(false));
    // The same id in another app is another notification.
    let mut other = notes[0].clone();
    other.app_id = AppId::from_uuid(uuid(APP2));
    assert_eq!(store.record_notification(&other).await, Ok(true));

    let mut events = Events::default();
    events.open("u1", new(), T0);
    events.holdout("u2", control(), T0);
    events.holdout("u3", control(), T0);
    let q = query(None, T0 + day * 60, &[], &[("EUR", 2.0)]).with_store_metrics(30);
    let data = results(store, &events, &q).await;
    let variant = |id: VariantId| {
        data.variants
            .iter()
            .find(|v| v.variant_id == id)
            .map(|v| v.store)
            .expect("the variant")
    };
    let (c, n) = (variant(control()), variant(new()));
    assert_eq!(
        (n.trial_started, n.trial_converted, n.paid, n.refunded),
        (1, 1, 1, 0),
        "u1: a trial converted on day 8"
    );
    assert_eq!(n.proceeds, sums(&[20.0]));
    assert_eq!(
        (c.trial_started, c.paid, c.refunded),
        (0, 1, 1),
        "u2 paid and was refunded; u3's only purchase is past the horizon"
    );
    assert_eq!(c.proceeds, sums(&[0.0, 0.0]));
}
