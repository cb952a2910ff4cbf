//! Prometheus metrics of the HTTP adapter: request latency histograms by route and status
//! (their `_count` is the request counter), rate-limit refusals, event outcomes.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScopeLabels {
    scope: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: &'static str,
}

fn latency_histogram() -> Histogram {
    // 50 µs to ~3.3 s: resolve lives at the low end, event bodies and outages at the high end.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_05, 2.0, 17,
    ))
}

/// The adapter's metrics. Cheap to clone (shared families).
#[derive(Clone, Debug)]
pub struct HttpMetrics {
    requests: Family<RequestLabels, Histogram, fn() -> Histogram>,
    rate_limited: Family<ScopeLabels, Counter>,
    events_accepted: Counter,
    events_rejected: Family<CodeLabels, Counter>,
    events_refused: Counter,
    event_requests_refused_unread: Counter,
    server_events_dropped: Counter,
}

impl Default for HttpMetrics {
    fn default() -> Self {
        Self {
            requests: Family::new_with_constructor(latency_histogram),
            rate_limited: Family::default(),
            events_accepted: Counter::default(),
            events_rejected: Family::default(),
            events_refused: Counter::default(),
            event_requests_refused_unread: Counter::default(),
            server_events_dropped: Counter::default(),
        }
    }
}

impl HttpMetrics {
    /// New metrics, registered in `registry` under the `flowgate_http` prefix.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("flowgate_http");
        r.register(
            "request_duration_seconds",
            "Request latency by route pattern and status",
            m.requests.clone(),
        );
        r.register(
            "rate_limited",
            "Requests refused with 429, by limit (ip or key)",
            m.rate_limited.clone(),
        );
        r.register(
            "events_accepted",
            "SDK events accepted (202) and handed to the sink",
            m.events_accepted.clone(),
        );
        r.register(
            "events_rejected",
            "SDK events rejected by validation, by code",
            m.events_rejected.clone(),
        );
        r.register(
            "events_refused",
            "SDK events refused with 503 overloaded",
            m.events_refused.clone(),
        );
        r.register(
            "event_requests_refused_unread",
            "Event requests refused with 503 overloaded before their body was parsed (the sink had no room for a full request)",
            m.event_requests_refused_unread.clone(),
        );
        r.register(
            "server_events_dropped",
            "resolve_no_flow events not recorded because the sink was full",
            m.server_events_dropped.clone(),
        );
        m
    }

    pub(crate) fn observe_request(&self, route: &'static str, status: u16, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels { route, status })
            .observe(elapsed.as_secs_f64());
    }

    pub(crate) fn rate_limited(&self, scope: &'static str) {
        self.rate_limited
            .get_or_create(&ScopeLabels { scope })
            .inc();
    }

    pub(crate) fn events_accepted(&self, n: usize) {
        self.events_accepted.inc_by(n as u64);
    }

    pub(crate) fn event_rejected(&self, code: &'static str) {
        self.events_rejected
            .get_or_create(&CodeLabels { code })
            .inc();
    }

    pub(crate) fn events_refused(&self, n: usize) {
        self.events_refused.inc_by(n as u64);
    }

    pub(crate) fn event_request_refused_unread(&self) {
        self.event_requests_refused_unread.inc();
    }

    pub(crate) fn server_events_dropped(&self, n: usize) {
        self.server_events_dropped.inc_by(n as u64);
    }
}
