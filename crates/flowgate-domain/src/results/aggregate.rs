//! The rules of D22's counting over a list of events, written for clarity: the reference the
//! stores' SQL is held to (`InMemoryStore` answers with it, and the port's contract suite runs
//! the same cases on every store).

use std::collections::{BTreeMap, HashMap};

use time::OffsetDateTime;

use super::report::{DailyCounts, ResultsData, ResultsQuery, VariantCounts};
use super::stats::VariantSums;
use crate::events::{AnalyticsEvent, EventType, NoFlowReason};
use crate::ids::{AppId, ExperimentId, VariantId};

/// Whether `e` is an exposure event of some experiment (a `flow_open`, or a holdout
/// `resolve_no_flow`, carrying an experiment id): that experiment when it is.
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

/// Per experiment of `app`, the users with at least one exposure (the list's figure).
pub fn exposure_counts<'e>(
    app: AppId,
    events: impl IntoIterator<Item = &'e AnalyticsEvent>,
) -> BTreeMap<ExperimentId, u64> {
    let mut users: BTreeMap<ExperimentId, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for e in events {
        if e.app_id != app {
            continue;
        }
        if let Some(experiment) = exposure_of_any(e) {
            users
                .entry(experiment)
                .or_default()
                .insert(e.user_id.as_str());
        }
    }
    users
        .into_iter()
        .map(|(id, u)| (id, u.len() as u64))
        .collect()
}

/// Whether `e` exposes its user to a variant of `query`'s experiment: a `flow_open`, or a
/// holdout `resolve_no_flow`, of the app, carrying the experiment and one of its variants, in
/// the window. The variant when it does.
pub(crate) fn exposure(query: &ResultsQuery, e: &AnalyticsEvent) -> Option<VariantId> {
    if e.app_id != query.app_id || !in_window(query, e.occurred_at) {
        return None;
    }
    // The id as resolve serves it: the canonical text, compared as text like the stores do.
    let experiment = query.experiment_id.to_string();
    if e.experiment_id.as_deref() != Some(experiment.as_str()) || exposure_of_any(e).is_none() {
        return None;
    }
    let variant = e.variant_id.as_deref()?;
    query
        .variants
        .iter()
        .copied()
        .find(|v| v.to_string() == variant)
}

fn in_window(query: &ResultsQuery, at: OffsetDateTime) -> bool {
    query.from.is_none_or(|from| at >= from) && at <= query.to
}

/// A user's exposure: the variants seen, and the first time.
struct Exposed {
    variant: VariantId,
    first: OffsetDateTime,
    multiple: bool,
}

/// D22's counts of `query` over `events`.
pub fn aggregate<'e>(
    query: &ResultsQuery,
    events: impl IntoIterator<Item = &'e AnalyticsEvent> + Clone,
) -> ResultsData {
    // Ordered by user, so the sums add up in the same order every time.
    let mut exposed: BTreeMap<&str, Exposed> = BTreeMap::new();
    for e in events.clone() {
        let Some(variant) = exposure(query, e) else {
            continue;
        };
        exposed
            .entry(e.user_id.as_str())
            .and_modify(|x| {
                x.multiple |= x.variant != variant;
                x.first = x.first.min(e.occurred_at);
            })
            .or_insert(Exposed {
                variant,
                first: e.occurred_at,
                multiple: false,
            });
    }
    let multiple_exposures = exposed.values().filter(|x| x.multiple).count() as u64;
    exposed.retain(|_, x| !x.multiple);

    // Per user: the first qualifying event of each conversion metric, and the revenue.
    let metrics = query.conversions.len();
    let mut converted: HashMap<&str, Vec<Option<OffsetDateTime>>> = HashMap::new();
    let mut revenue: HashMap<&str, f64> = HashMap::new();
    let mut unconverted_purchases = 0u64;
    for e in events {
        if e.app_id != query.app_id || e.occurred_at > query.to {
            continue;
        }
        let Some(user) = exposed.get(e.user_id.as_str()) else {
            continue;
        };
        if e.occurred_at < user.first {
            continue;
        }
        if let Some(i) = query.conversions.iter().position(|t| *t == e.event_type) {
            let firsts = converted
                .entry(e.user_id.as_str())
                .or_insert_with(|| vec![None; metrics]);
            firsts[i] =
                Some(firsts[i].map_or(e.occurred_at, |t: OffsetDateTime| t.min(e.occurred_at)));
        }
        if e.event_type == EventType::PurchaseComplete {
            let amount = e.payload.get("revenue").and_then(serde_json::Value::as_f64);
            let currency = e
                .payload
                .get("currency")
                .and_then(serde_json::Value::as_str);
            if let (Some(amount), Some(currency)) = (amount, currency) {
                match query.rate(currency) {
                    Some(rate) => {
                        *revenue.entry(e.user_id.as_str()).or_insert(0.0) += amount * rate
                    }
                    None => unconverted_purchases += 1,
                }
            }
        }
    }

    let mut variants: BTreeMap<VariantId, VariantCounts> = BTreeMap::new();
    let mut daily: BTreeMap<(time::Date, VariantId), DailyCounts> = BTreeMap::new();
    for (user, x) in &exposed {
        let counts = variants.entry(x.variant).or_insert_with(|| {
            VariantCounts::new(x.variant, 0, vec![0; metrics], VariantSums::default())
        });
        counts.users += 1;
        let value = revenue.get(user).copied().unwrap_or(0.0);
        counts.revenue.users += 1;
        counts.revenue.sum += value;
        counts.revenue.sum_squares += value * value;
        let day = |at: OffsetDateTime| at.to_offset(time::UtcOffset::UTC).date();
        daily
            .entry((day(x.first), x.variant))
            .or_insert_with(|| DailyCounts::new(day(x.first), x.variant, 0, vec![0; metrics]))
            .users += 1;
        if let Some(firsts) = converted.get(user) {
            for (i, first) in firsts.iter().enumerate() {
                if let Some(at) = first {
                    counts.conversions[i] += 1;
                    daily
                        .entry((day(*at), x.variant))
                        .or_insert_with(|| {
                            DailyCounts::new(day(*at), x.variant, 0, vec![0; metrics])
                        })
                        .conversions[i] += 1;
                }
            }
        }
    }
    ResultsData {
        first_exposure: exposed.values().map(|x| x.first).min(),
        variants: variants.into_values().collect(),
        multiple_exposures,
        unconverted_purchases,
        daily: daily.into_values().collect(),
    }
}
