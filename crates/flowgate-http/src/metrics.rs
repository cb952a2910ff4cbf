//! Prometheus metrics of the HTTP adapter, kept in a prometheus-client registry and encoded by
//! it: request latency histograms by route and status (their `_count` is the request counter),
//! rate-limit refusals, event outcomes.
//!
//! Request latencies are the one part kept by hand: each worker records its own
//! ([`LatencyRecorder`]) and a scrape sums them into the same histograms, because
//! prometheus-client's family shared by every worker takes a lock and writes shared counts on
//! every request, which `worker.rs` rules out (its cost in instructions:
//! docs/benchmarks-method.md, P10).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::MetricType;
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AbortLabels {
    route: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// An app of the catalog: the number of values is the number of apps, bounded by the catalog.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AppLabels {
    app_id: String,
}

/// Finite bucket bounds of the latency histograms: 50 µs doubling to ~3.3 s. Resolve lives at
/// the low end, event bodies and outages at the high end. A last bucket, `+Inf`, follows.
const BOUNDS: [f64; 17] = {
    let mut bounds = [0.000_05; 17];
    let mut i = 1;
    while i < bounds.len() {
        bounds[i] = bounds[i - 1] * 2.0;
        i += 1;
    }
    bounds
};

/// One route and status of one recorder: written by that recorder only (single writer, so
/// plain loads and stores suffice), read when scraped.
#[derive(Debug, Default)]
struct Series {
    count: AtomicU64,
    /// The sum of the observed seconds, as `f64` bits.
    sum: AtomicU64,
    /// Observations per bucket (not cumulative): `BOUNDS`, then `+Inf`.
    buckets: [AtomicU64; BOUNDS.len() + 1],
}

impl Series {
    fn record(&self, secs: f64) {
        let bump =
            |cell: &AtomicU64| cell.store(cell.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let bucket = BOUNDS
            .iter()
            .position(|&bound| secs <= bound)
            .unwrap_or(BOUNDS.len());
        bump(&self.buckets[bucket]);
        let sum = f64::from_bits(self.sum.load(Ordering::Relaxed)) + secs;
        self.sum.store(sum.to_bits(), Ordering::Relaxed);
        // Last: a scrape that sees the count sees at least that many in the buckets.
        self.count
            .store(self.count.load(Ordering::Relaxed) + 1, Ordering::Release);
    }
}

/// The series of one recorder, for the scrape.
type Shard = Mutex<Vec<(RequestLabels, Arc<Series>)>>;

/// Every recorder's series, summed per route and status when scraped.
#[derive(Debug, Default)]
struct RequestLatencies {
    shards: Mutex<Vec<Arc<Shard>>>,
}

impl RequestLatencies {
    fn recorder(&self) -> LatencyRecorder {
        let shard = Arc::new(Shard::default());
        lock(&self.shards).push(Arc::clone(&shard));
        LatencyRecorder {
            shard,
            local: RefCell::default(),
        }
    }

    /// Sum, count and per-bucket counts of every route and status, summed over the recorders.
    fn totals(&self) -> Vec<(RequestLabels, f64, u64, [u64; BOUNDS.len() + 1])> {
        let mut out: Vec<(RequestLabels, f64, u64, [u64; BOUNDS.len() + 1])> = Vec::new();
        for shard in lock(&self.shards).iter() {
            for (labels, series) in lock(shard).iter() {
                let index = match out.iter().position(|(l, ..)| l == labels) {
                    Some(i) => i,
                    None => {
                        out.push((labels.clone(), 0.0, 0, [0; BOUNDS.len() + 1]));
                        out.len() - 1
                    }
                };
                let total = &mut out[index];
                // The count first (acquire): the buckets hold at least as many.
                total.2 += series.count.load(Ordering::Acquire);
                total.1 += f64::from_bits(series.sum.load(Ordering::Relaxed));
                for (sum, cell) in total.3.iter_mut().zip(&series.buckets) {
                    *sum += cell.load(Ordering::Relaxed);
                }
            }
        }
        out.sort_by(|a, b| (a.0.route, a.0.status).cmp(&(b.0.route, b.0.status)));
        out
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Collector for RequestLatencies {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "request_duration_seconds",
            // What `Registry::register` would write: it ends the help text with a period.
            "Request latency by route pattern and status.",
            None,
            MetricType::Histogram,
        )?;
        for (labels, sum, count, buckets) in self.totals() {
            // The buckets hold at least `count` observations (see `Series::record`): one that
            // a request added after its count was read is left out, so the buckets add up to
            // the count, as the format requires.
            let mut left = count;
            let bounds: Vec<(f64, u64)> = BOUNDS
                .iter()
                .copied()
                .chain(std::iter::once(f64::INFINITY))
                .zip(buckets)
                .map(|(bound, n)| {
                    let n = n.min(left);
                    left -= n;
                    (bound, n)
                })
                .collect();
            family
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(sum, count, &bounds, None)?;
        }
        Ok(())
    }
}

/// Records request latencies for one worker (not shared between threads): a request writes
/// only this recorder's memory. Made by [`HttpMetrics::recorder`].
#[derive(Debug)]
pub struct LatencyRecorder {
    shard: Arc<Shard>,
    /// This recorder's series, looked up without the shard's lock (a handful of routes and
    /// statuses).
    local: RefCell<Vec<(&'static str, u16, Arc<Series>)>>,
}

impl LatencyRecorder {
    /// Records one request of `route` answered with `status` after `elapsed`.
    pub fn observe(&self, route: &'static str, status: u16, elapsed: Duration) {
        let mut local = self.local.borrow_mut();
        let series = match local
            .iter()
            .find(|(r, s, _)| std::ptr::eq(*r, route) && *s == status)
        {
            Some((.., series)) => series,
            None => {
                let series = Arc::new(Series::default());
                lock(&self.shard).push((RequestLabels { route, status }, Arc::clone(&series)));
                local.push((route, status, series));
                &local[local.len() - 1].2
            }
        };
        series.record(elapsed.as_secs_f64());
    }
}

/// The adapter's metrics. Cheap to clone (shared families).
#[derive(Clone, Debug)]
pub struct HttpMetrics {
    requests: Arc<RequestLatencies>,
    /// For callers without a recorder of their own (the admin listener's middleware).
    shared_recorder: Arc<Mutex<LatencyRecorder>>,
    rate_limited: Family<ScopeLabels, Counter>,
    events_accepted: Counter,
    events_rejected: Family<CodeLabels, Counter>,
    events_refused: Counter,
    events_not_stored_in_time: Counter,
    server_events_dropped: Counter,
    requests_aborted: Family<AbortLabels, Counter>,
    connections_refused: Family<ReasonLabels, Counter>,
    unknown_placement_events_suppressed: Family<AppLabels, Counter>,
    client_error_log_lines_suppressed: Counter,
    /// Which request lines of client errors are written at info (D25).
    pub(crate) client_error_log: Arc<crate::log_sampler::LogSampler>,
}

impl Default for HttpMetrics {
    fn default() -> Self {
        let requests = Arc::new(RequestLatencies::default());
        let shared_recorder = Arc::new(Mutex::new(requests.recorder()));
        Self {
            requests,
            shared_recorder,
            rate_limited: Family::default(),
            events_accepted: Counter::default(),
            events_rejected: Family::default(),
            events_refused: Counter::default(),
            events_not_stored_in_time: Counter::default(),
            server_events_dropped: Counter::default(),
            requests_aborted: Family::default(),
            connections_refused: Family::default(),
            unknown_placement_events_suppressed: Family::default(),
            client_error_log_lines_suppressed: Counter::default(),
            client_error_log: Arc::new(crate::log_sampler::LogSampler::new(
                crate::log_sampler::CLIENT_ERROR_LINES_PER_SECOND,
            )),
        }
    }
}

impl HttpMetrics {
    /// New metrics, registered in `registry` under the `flowgate_http` prefix.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("flowgate_http");
        r.register_collector(Box::new(Arc::clone(&m.requests)));
        r.register(
            "rate_limited",
            "Requests refused with 429, by limit (ip or key)",
            m.rate_limited.clone(),
        );
        r.register(
            "events_accepted",
            "SDK events accepted (202): stored, or with events.ack = buffered handed to the sink",
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
            "events_not_stored_in_time",
            "SDK events answered 503 overloaded because they were not stored within events.ack_timeout_ms (they stay queued; the SDK's retry is counted once)",
            m.events_not_stored_in_time.clone(),
        );
        r.register(
            "server_events_dropped",
            "resolve_no_flow events not recorded because the sink was full",
            m.server_events_dropped.clone(),
        );
        r.register(
            "requests_aborted",
            "Requests whose body did not arrive in time (reason timed_out, answered 408) or was broken off by the client (broken), by route; their time is the client's and is not in request_duration_seconds",
            m.requests_aborted.clone(),
        );
        r.register(
            "connections_refused",
            "API connections closed as soon as accepted, by reason (per_address: the client address holds server.max_connections_per_address connections already)",
            m.connections_refused.clone(),
        );
        r.register(
            "unknown_placement_events_suppressed",
            "resolve_no_flow events for unknown placements not recorded, by app: over events.unknown_placement_events_per_minute, or a key already recorded in the same minute (D25)",
            m.unknown_placement_events_suppressed.clone(),
        );
        r.register(
            "client_error_log_lines_suppressed",
            "Request log lines of client errors (4xx) not written because more than the sampled number per second arrived; a summary line says how many",
            m.client_error_log_lines_suppressed.clone(),
        );
        m
    }

    /// A recorder of request latencies for one worker, summed with the others' when scraped.
    pub fn recorder(&self) -> LatencyRecorder {
        self.requests.recorder()
    }

    /// Records one request through the shared recorder (takes a lock: for the admin listener,
    /// whose few requests need no recorder of their own).
    pub(crate) fn observe_request(&self, route: &'static str, status: u16, elapsed: Duration) {
        lock(&self.shared_recorder).observe(route, status, elapsed);
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

    pub(crate) fn events_not_stored_in_time(&self, n: usize) {
        self.events_not_stored_in_time.inc_by(n as u64);
    }

    pub(crate) fn server_events_dropped(&self, n: usize) {
        self.server_events_dropped.inc_by(n as u64);
    }

    pub(crate) fn request_aborted(&self, route: &'static str, reason: &'static str) {
        self.requests_aborted
            .get_or_create(&AbortLabels { route, reason })
            .inc();
    }

    /// Counts an API connection closed as soon as accepted.
    pub fn connection_refused(&self, reason: &'static str) {
        self.connections_refused
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    pub(crate) fn unknown_placement_events_suppressed(&self, app: &str, n: u64) {
        self.unknown_placement_events_suppressed
            .get_or_create(&AppLabels {
                app_id: app.to_owned(),
            })
            .inc_by(n);
    }

    pub(crate) fn client_error_log_lines_suppressed(&self, n: u64) {
        self.client_error_log_lines_suppressed.inc_by(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

    const RESOLVE: &str = "/v1/apps/{appId}/placements/{placementId}/resolve";
    const EVENTS: &str = "/v1/apps/{appId}/events";

    fn text(registry: &Registry) -> String {
        let mut out = String::new();
        encode(&mut out, registry).unwrap();
        out
    }

    /// The exposition of per-worker recorders is what one shared prometheus-client histogram
    /// family gives for the same requests.
    #[test]
    fn recorders_are_summed_into_the_histograms_one_family_would_show() {
        let observations: Vec<(&'static str, u16, f64)> = (0..300)
            .map(|i| {
                let route = if i % 3 == 0 { EVENTS } else { RESOLVE };
                let status = if i % 7 == 0 { 429 } else { 200 };
                // From 10 µs to beyond the last finite bound (about 3.3 s).
                (route, status, 0.000_01 * 1.06_f64.powi(i % 250))
            })
            .collect();

        let mut registry = Registry::default();
        let metrics = HttpMetrics::new(&mut registry);
        let workers = [metrics.recorder(), metrics.recorder(), metrics.recorder()];
        for (i, &(route, status, secs)) in observations.iter().enumerate() {
            let elapsed = Duration::from_secs_f64(secs);
            if i % 10 == 0 {
                metrics.observe_request(route, status, elapsed);
            } else {
                workers[i % 3].observe(route, status, elapsed);
            }
        }

        let mut expected_registry = Registry::default();
        let family =
            Family::<RequestLabels, Histogram, fn() -> Histogram>::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.000_05, 2.0, 17))
            });
        expected_registry
            .sub_registry_with_prefix("flowgate_http")
            .register(
                "request_duration_seconds",
                "Request latency by route pattern and status",
                family.clone(),
            );
        for &(route, status, secs) in &observations {
            family
                .get_or_create(&RequestLabels { route, status })
                .observe(Duration::from_secs_f64(secs).as_secs_f64());
        }

        // Every line but the sums exactly; the sums to rounding (added in another order).
        let histograms = |text: &str| -> (Vec<String>, Vec<(String, f64)>) {
            let mut lines: Vec<String> = text
                .lines()
                .filter(|l| l.contains("request_duration_seconds"))
                .map(str::to_owned)
                .collect();
            lines.sort();
            let (sums, exact): (Vec<String>, Vec<String>) =
                lines.into_iter().partition(|l| l.contains("_sum{"));
            let sums = sums
                .iter()
                .map(|l| {
                    let (series, value) = l.rsplit_once(' ').unwrap();
                    (series.to_owned(), value.parse().unwrap())
                })
                .collect();
            (exact, sums)
        };
        let (got, got_sums) = histograms(&text(&registry));
        let (expected, expected_sums) = histograms(&text(&expected_registry));
        assert_eq!(
            got.len(),
            2 + 4 * 19,
            "four series of 18 buckets and a count: {got:?}"
        );
        assert_eq!(got, expected);
        assert_eq!(got_sums.len(), 4);
        for ((series, got), (expected_series, expected)) in got_sums.iter().zip(&expected_sums) {
            assert_eq!(series, expected_series);
            assert!(
                (got - expected).abs() < 1e-9 * expected,
                "{series}: {got} against {expected}"
            );
        }
        let events_ok = observations
            .iter()
            .filter(|&&(route, status, _)| route == EVENTS && status == 200)
            .count();
        assert!(got.contains(&format!(
            "flowgate_http_request_duration_seconds_count{{route=\"{EVENTS}\",status=\"200\"}} {events_ok}"
        )));
    }

    #[test]
    fn buckets_never_add_up_to_more_than_the_count() {
        // A scrape can read a series between a request's bucket and its count: the bucket is
        // left out, never reported beyond the count.
        let latencies = RequestLatencies::default();
        let recorder = latencies.recorder();
        recorder.observe(RESOLVE, 200, Duration::from_micros(40));
        let series = Arc::clone(&recorder.local.borrow()[0].2);
        series.buckets[3].store(1, Ordering::Relaxed); // half of a second observation
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Arc::new(latencies)));
        let out = text(&registry);
        assert!(out.contains("request_duration_seconds_count{route=\"/v1/apps/{appId}/placements/{placementId}/resolve\",status=\"200\"} 1"), "{out}");
        assert!(out.contains("request_duration_seconds_bucket{le=\"+Inf\",route=\"/v1/apps/{appId}/placements/{placementId}/resolve\",status=\"200\"} 1"), "{out}");
        assert!(out.contains("request_duration_seconds_bucket{le=\"0.0004\",route=\"/v1/apps/{appId}/placements/{placementId}/resolve\",status=\"200\"} 1"), "{out}");
    }
}
