//! Experiment results as the admin API and the console show them (D22): the report and the
//! list are read by the control plane ([`flowgate_control::results`], the same for every
//! caller); [`report_json`] writes D22's JSON, [`verdict_words`] its sentence.

use std::collections::BTreeMap;

use flowgate_control::results::{Listed, ReportError};
use flowgate_domain::ids::ExperimentId;
use flowgate_domain::results::{Decision, ExperimentReport, MetricReport, Verdict};
use flowgate_domain::text::rfc3339;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use serde_json::{json, Value};

/// The list as JSON: `{"experiments": [...]}`, each with its app, placement, status, schedule
/// (`starts_at`, `ends_at`: RFC 3339 or null, D29), variants
/// and, when known, its exposed users (every user with an exposure, multiple ones included).
pub fn experiments_json(listed: &[Listed<'_>], exposed: &BTreeMap<ExperimentId, u64>) -> Value {
    let items: Vec<Value> = listed
        .iter()
        .map(|l| {
            json!({
                "experiment_id": l.experiment.id().to_string(),
                "name": l.experiment.name(),
                "app_id": l.app.id().to_string(),
                "app_name": l.app.name(),
                "placement_key": l.placement,
                "status": l.experiment.status().as_str(),
                "starts_at": l.experiment.starts_at().map(rfc3339),
                "ends_at": l.experiment.ends_at().map(rfc3339),
                "exposed_users": exposed.get(&l.experiment.id()).copied().unwrap_or(0),
                "variants": l.experiment.variants().iter().map(|v| json!({
                    "variant_id": v.id().to_string(), "name": v.name(), "weight": v.weight(),
                    "holdout": v.flow().is_none(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "experiments": items })
}

/// A figure, `null` when not a finite number.
fn figure(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// D22's JSON of a report (stable; changes are additions only).
pub fn report_json(r: &ExperimentReport) -> Value {
    let metrics: Vec<Value> = r
        .metrics
        .iter()
        .map(|m| {
            let variants: Vec<Value> = m
                .variants
                .iter()
                .map(|v| {
                    let estimate = match &v.comparison {
                        Some(Ok(e)) => Some(e),
                        None | Some(Err(_)) => None,
                    };
                    // A figure that is `null` says why: the comparison's reason, or
                    // `overflow` for sums that left the float range (the control's too).
                    let reason = v.reason(m.kind).map(|no| no.code());
                    let field = |f: fn(&flowgate_domain::results::Estimate) -> f64| {
                        estimate.map_or(Value::Null, |e| figure(f(e)))
                    };
                    json!({
                        "variant_id": v.variant_id.to_string(),
                        "users": v.sums.users,
                        "sum": figure(v.sums.sum),
                        "sum_squares": figure(v.sums.sum_squares),
                        "mean": figure(v.mean),
                        "lift": field(|e| e.lift),
                        "ci_low": field(|e| e.ci_low),
                        "ci_high": field(|e| e.ci_high),
                        "p_value": field(|e| e.p_value),
                        "chance_to_win": field(|e| e.chance_to_win),
                        "credible_low": field(|e| e.credible_low),
                        "credible_high": field(|e| e.credible_high),
                        "reason": reason,
                    })
                })
                .collect();
            json!({
                "metric": m.metric, "kind": m.kind.as_str(), "role": MetricRole::of(r, m).as_str(),
                "variants": variants,
            })
        })
        .collect();
    json!({
        "experiment_id": r.experiment_id.to_string(),
        "name": r.name,
        "app_id": r.app_id.to_string(),
        "status": r.status.as_str(),
        "from": rfc3339(r.from),
        "to": rfc3339(r.to),
        "currency": r.currency,
        "exposed_users": r.exposed_users,
        "multiple_exposures": r.multiple_exposures,
        "unconverted_purchases": r.unconverted_purchases,
        "srm_p_value": figure(r.srm_p_value),
        "warnings": r.warnings.iter().map(|w| json!({"code": w.code, "message": w.message})).collect::<Vec<_>>(),
        "variants": r.variants.iter().map(|v| json!({
            "variant_id": v.variant_id.to_string(), "name": v.name, "weight": v.weight, "users": v.users,
        })).collect::<Vec<_>>(),
        "metrics": metrics,
        "method": r.method.as_str(),
        "analysis": {
            "primary_metric": r.analysis.primary_metric,
            "guardrail_metrics": r.analysis.guardrail_metrics,
            "sequential": r.analysis.sequential,
            "minimum_users": r.analysis.minimum_users,
        },
        "decision": decision_json(&r.decision),
        "daily": r.daily.iter().map(|d| json!({
            "date": d.date.to_string(),
            "variant_id": d.variant_id.to_string(),
            "users": d.users,
            "conversions": d.conversions.iter().map(|(t, n)| (t.as_str().to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
        })).collect::<Vec<_>>(),
    })
}

/// The verdict in words (D27), as the CLI's first line and the console's heading say it:
/// "Ship new", "Roll back to control", "Keep running", "No decision".
pub fn verdict_words(r: &ExperimentReport) -> String {
    let name = |id: Option<flowgate_domain::ids::VariantId>| {
        id.and_then(|id| r.variants.iter().find(|v| v.variant_id == id))
            .map(|v| v.name.clone())
    };
    match r.decision.verdict {
        Verdict::Ship => format!(
            "Ship {}",
            name(r.decision.variant_id).unwrap_or_else(|| "the treatment".to_owned())
        ),
        Verdict::RollBack => format!(
            "Roll back to {}",
            r.variants
                .first()
                .map_or_else(|| "the control".to_owned(), |v| v.name.clone())
        ),
        Verdict::KeepRunning => "Keep running".to_owned(),
        _ => "No decision".to_owned(),
    }
}

/// A metric's part in the decision (D27).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricRole {
    /// The metric that decides.
    Primary,
    /// A metric that must not get worse.
    Guardrail,
    /// Reported, not read by the decision.
    Other,
}

impl MetricRole {
    /// The part of `m` in the decision of `r`.
    pub fn of(r: &ExperimentReport, m: &MetricReport) -> Self {
        if m.metric == r.analysis.primary_metric {
            MetricRole::Primary
        } else if r.analysis.guardrail_metrics.contains(&m.metric) {
            MetricRole::Guardrail
        } else {
            MetricRole::Other
        }
    }

    /// `primary`, `guardrail` or `other`.
    pub const fn as_str(self) -> &'static str {
        match self {
            MetricRole::Primary => "primary",
            MetricRole::Guardrail => "guardrail",
            MetricRole::Other => "other",
        }
    }
}

/// The report's metrics in the order people read them (D27): the primary metric, the
/// guardrails in their order, then the others in the report's.
pub fn metrics_by_role(r: &ExperimentReport) -> Vec<(&MetricReport, MetricRole)> {
    let role = |m: &MetricReport| MetricRole::of(r, m);
    let rank = |m: &MetricReport| match role(m) {
        MetricRole::Primary => 0,
        MetricRole::Guardrail => {
            1 + r
                .analysis
                .guardrail_metrics
                .iter()
                .position(|g| *g == m.metric)
                .unwrap_or(0)
        }
        MetricRole::Other => usize::MAX,
    };
    let mut metrics: Vec<(&MetricReport, MetricRole)> =
        r.metrics.iter().map(|m| (m, role(m))).collect();
    // Stable: the others keep the report's order.
    metrics.sort_by_key(|(m, _)| rank(m));
    metrics
}

/// D27's decision: `{"verdict", "variant_id", "reasons": [{"code", "message", "metric",
/// "variant_id"}]}`.
pub fn decision_json(d: &Decision) -> Value {
    json!({
        "verdict": d.verdict.as_str(),
        "variant_id": d.variant_id.map(|id| id.to_string()),
        "reasons": d.reasons.iter().map(|r| json!({
            "code": r.code,
            "message": r.message,
            "metric": r.metric,
            "variant_id": r.variant_id.map(|id| id.to_string()),
        })).collect::<Vec<_>>(),
    })
}

/// Report queries' metrics (`flowgate_results_*`): their count by outcome and their duration.
#[derive(Clone, Debug)]
pub struct ResultsMetrics {
    queries: Family<OutcomeLabels, Counter>,
    duration: Histogram,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

impl ResultsMetrics {
    /// New metrics, registered in `registry` under the `flowgate_results` prefix.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            queries: Family::default(),
            // 10 ms doubling to about 80 s.
            duration: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
        };
        let r = registry.sub_registry_with_prefix("flowgate_results");
        r.register(
            "queries",
            "Experiment results read (a report or a list's exposed users), by outcome: ok, timeout (past experiments.query_timeout_ms) or error",
            m.queries.clone(),
        );
        r.register_with_unit(
            "query_duration",
            "Time to read an experiment's results or a list's exposed users, whatever the outcome",
            Unit::Seconds,
            m.duration.clone(),
        );
        m
    }

    /// Counts one read that took `took` and ended in `result`.
    pub fn observe<T>(&self, took: std::time::Duration, result: &Result<T, ReportError>) {
        let outcome = match result {
            Ok(_) => "ok",
            Err(e) if e.timed_out() => "timeout",
            Err(ReportError::Store(_)) => "error",
            // The request's own mistakes read nothing.
            Err(_) => return,
        };
        self.queries.get_or_create(&OutcomeLabels { outcome }).inc();
        self.duration.observe(took.as_secs_f64());
    }
}
