//! Metrics read at scrape time (the served catalog, the store's health, the sink's and ingest's
//! statistics, the dead letters, event maintenance), encoded by prometheus-client like the
//! registry's own metrics: [`Collected`] is a collector of the registry that asks a
//! [`Scraped`] source for its values on every scrape.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;

/// A value read at scrape time: whole (counts, flags) or not (seconds).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value {
    /// A count or a flag.
    Whole(u64),
    /// Anything else.
    Real(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Whole(v)
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Value::Whole(u64::try_from(v).unwrap_or(u64::MAX))
    }
}

impl From<u8> for Value {
    fn from(v: u8) -> Self {
        Value::Whole(u64::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}

/// Where a [`Scraped`] source writes its metrics during one scrape.
pub(crate) struct Scrape<'a> {
    encoder: DescriptorEncoder<'a>,
    error: Option<fmt::Error>,
}

impl Scrape<'_> {
    /// Records the first encoding error (writing into a `String` does not fail).
    fn keep(&mut self, result: Result<(), fmt::Error>) {
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }

    /// A gauge `name`.
    pub(crate) fn gauge(&mut self, name: &str, help: &str, value: impl Into<Value>) {
        let result = match value.into() {
            Value::Whole(v) => encode(&mut self.encoder, name, help, &ConstGauge::new(v)),
            Value::Real(v) => encode(&mut self.encoder, name, help, &ConstGauge::new(v)),
        };
        self.keep(result);
    }

    /// A counter `name` (its sample is `name_total`).
    pub(crate) fn counter(&mut self, name: &str, help: &str, value: impl Into<Value>) {
        let result = match value.into() {
            Value::Whole(v) => encode(&mut self.encoder, name, help, &ConstCounter::new(v)),
            Value::Real(v) => encode(&mut self.encoder, name, help, &ConstCounter::new(v)),
        };
        self.keep(result);
    }

    /// A counter `name` with one sample per value of its one label `label` (`name_total{label=
    /// "..."}`); no sample at all while `values` is empty.
    pub(crate) fn labelled_counter(
        &mut self,
        name: &str,
        help: &str,
        label: &str,
        values: &[(String, u64)],
    ) {
        if values.is_empty() {
            return;
        }
        let result = self
            .encoder
            .encode_descriptor(name, help, None, MetricType::Counter)
            .and_then(|mut metric| {
                for (value, count) in values {
                    let labels = [(label, value.as_str())];
                    let family = metric.encode_family(&labels)?;
                    ConstCounter::new(*count).encode(family)?;
                }
                Ok(())
            });
        self.keep(result);
    }

    /// A histogram `name`.
    pub(crate) fn histogram(&mut self, name: &str, help: &str, histogram: &Histogram) {
        let result = encode(&mut self.encoder, name, help, histogram);
        self.keep(result);
    }

    /// An information gauge `name` of value 1 whose labels say what it informs of.
    pub(crate) fn info(&mut self, name: &str, help: &str, labels: &[(&str, &str)]) {
        let result = self
            .encoder
            .encode_descriptor(name, help, None, MetricType::Gauge)
            .and_then(|mut metric| {
                let family = metric.encode_family(&labels)?;
                ConstGauge::new(1u64).encode(family)
            });
        self.keep(result);
    }
}

/// One metric of `metric`'s type, with its descriptor.
fn encode(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> Result<(), fmt::Error> {
    let family = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(family)
}

/// What reads its metrics at scrape time.
pub(crate) trait Scraped: Send + Sync + 'static {
    /// Writes the current values.
    fn scrape(&self, out: &mut Scrape<'_>);
}

/// A registry collector of a [`Scraped`] source.
pub(crate) struct Collected(pub Arc<dyn Scraped>);

impl fmt::Debug for Collected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Collected")
    }
}

impl Collector for Collected {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut scrape = Scrape {
            encoder,
            error: None,
        };
        self.0.scrape(&mut scrape);
        scrape.error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    struct Fixed;

    impl Scraped for Fixed {
        fn scrape(&self, out: &mut Scrape<'_>) {
            out.gauge("demo_revision", "A revision.", 7u64);
            out.gauge("demo_age_seconds", "An age.", 1.5);
            out.counter("demo_reloads", "Reloads.", 3u64);
            out.info(
                "demo_info",
                "What it is.",
                &[("sink", "store"), ("ack", "stored")],
            );
            let waits = Histogram::new([0.1, 1.0]);
            for wait in [0.0625, 0.0625, 0.375, 3.0] {
                waits.observe(wait);
            }
            out.histogram("demo_wait_seconds", "Waits.", &waits);
            out.labelled_counter(
                "demo_unreadable",
                "Unreadable.",
                "format",
                &[("a.v2+json".to_owned(), 2), ("b".to_owned(), 1)],
            );
            out.labelled_counter("demo_none", "No values yet.", "format", &[]);
        }
    }

    #[test]
    fn scraped_values_are_encoded_as_openmetrics() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Collected(Arc::new(Fixed))));
        let mut text = String::new();
        prometheus_client::encoding::text::encode_registry(&mut text, &registry).unwrap();
        for line in [
            "# TYPE demo_revision gauge",
            "demo_revision 7",
            "demo_age_seconds 1.5",
            "# TYPE demo_reloads counter",
            "demo_reloads_total 3",
            "demo_info{sink=\"store\",ack=\"stored\"} 1",
            "# TYPE demo_unreadable counter",
            "demo_unreadable_total{format=\"a.v2+json\"} 2",
            "demo_unreadable_total{format=\"b\"} 1",
            "# TYPE demo_wait_seconds histogram",
            "demo_wait_seconds_bucket{le=\"0.1\"} 2",
            "demo_wait_seconds_bucket{le=\"1.0\"} 3",
            "demo_wait_seconds_bucket{le=\"+Inf\"} 4",
            "demo_wait_seconds_count 4",
            "demo_wait_seconds_sum 3.5",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
        }
    }
}
