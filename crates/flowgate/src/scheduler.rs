//! The scheduler (D29) that every `flowgate serve` runs: every `scheduler.interval_ms` it takes
//! (or renews) the store's lease `scheduler` for `scheduler.lease_seconds`; the replica that
//! holds it makes the control plane's pass ([`flowgate_control::scheduler::pass`]: scheduled
//! changes, experiments' schedules, running rollouts), logs and counts it. Only one replica acts
//! at a time, and when it dies another takes over once the lease expires. The lease avoids
//! doubled work; exactly once is the store's: each step is recorded, keyed by
//! `(rollout, step)`, in the transaction of its catalog change, so a step applied by a replica
//! that lost the lease mid-pass (paused, partitioned) is refused to the next one and nothing
//! is written twice.

use std::sync::Arc;
use std::time::Duration;

use flowgate_control::results::ResultsSettings;
use flowgate_control::scheduler::PassInputs;
use flowgate_control::schedules::ScheduleWatch;
use flowgate_domain::ports::{ResultsSource, RolloutStore as _};
use flowgate_store::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use flowgate_control::rollouts::Outcome;

/// The lease's name in the store.
const LEASE: &str = "scheduler";

/// The scheduler's metrics.
#[derive(Clone, Debug, Default)]
pub struct SchedulerMetrics {
    steps: Family<OutcomeLabels, Counter>,
    changes: Family<OutcomeLabels, Counter>,
    leader: Gauge,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

impl SchedulerMetrics {
    /// Registered under `flowgate_rollout` and `flowgate_scheduler`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry
            .sub_registry_with_prefix("flowgate_rollout")
            .register(
                "steps",
                "Rollout steps taken by this replica's scheduler, by outcome: step, completed, \
             rolled_back (automatic rollbacks: alert on any), paused (sample ratio mismatch, \
             guardrail_no_data), abandoned (its experiment left the catalog or ended), failed \
             (retried next pass)",
                m.steps.clone(),
            );
        let scheduler = registry.sub_registry_with_prefix("flowgate_scheduler");
        scheduler.register(
            "leader",
            "1 while this replica holds the scheduler's lease",
            m.leader.clone(),
        );
        scheduler.register(
            "changes",
            "Scheduled catalog changes and experiment schedules (starts_at, ends_at) this \
             replica's scheduler applied (applied) or found no longer applying (failed)",
            m.changes.clone(),
        );
        m
    }

    fn count(&self, outcome: &'static str) {
        self.steps.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    fn changes(&self, outcome: &'static str) {
        self.changes.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}

/// How the scheduler runs (`[scheduler]`).
#[derive(Clone, Debug)]
pub struct SchedulerSettings {
    /// Between passes.
    pub interval: Duration,
    /// How long a lease lasts without renewal.
    pub lease: Duration,
    /// How long after a step its reading starts: every replica serves the step by then.
    pub settle: Duration,
}

/// Runs until `stop` turns true, then gives the lease up.
pub async fn run(
    store: Store,
    reader: Arc<dyn ResultsSource>,
    results: ResultsSettings,
    settings: SchedulerSettings,
    metrics: SchedulerMetrics,
    mut stop: watch::Receiver<bool>,
) {
    let holder = holder_id();
    // The first pass one interval after the start, not at once: a starting replica has just
    // loaded the catalog for its own start, and replicas restarted together do not all read it
    // again in the same instant.
    let mut every = tokio::time::interval_at(
        tokio::time::Instant::now() + settings.interval,
        settings.interval,
    );
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut leading = false;
    let mut watch = ScheduleWatch::default();
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.changed() => break,
        }
        if *stop.borrow() {
            break;
        }
        let now = time::OffsetDateTime::now_utc();
        match store.take_lease(LEASE, &holder, now, settings.lease).await {
            Ok(true) => {
                if !leading {
                    tracing::info!(holder = %holder, "scheduler: this replica holds the lease");
                }
                leading = true;
            }
            Ok(false) => {
                leading = false;
            }
            Err(e) => {
                tracing::warn!(error = %e, "scheduler: the lease could not be read");
                leading = false;
            }
        }
        metrics.leader.set(i64::from(leading));
        if !leading {
            continue;
        }
        let inputs = PassInputs {
            reader: reader.as_ref(),
            results: &results,
            settle: settings.settle,
        };
        pass(&store, &inputs, &metrics, now, &mut watch).await;
    }
    if leading {
        let _ = store.release_lease(LEASE, &holder).await;
    }
}

/// One pass ([`flowgate_control::scheduler::pass`]), each outcome logged and counted.
async fn pass(
    store: &Store,
    inputs: &PassInputs<'_>,
    metrics: &SchedulerMetrics,
    now: time::OffsetDateTime,
    watch: &mut ScheduleWatch,
) {
    let done = flowgate_control::scheduler::pass(store, inputs, now, watch).await;
    match done.changes {
        Ok(done) => log_due(metrics, "scheduled change", done),
        Err(e) => tracing::warn!(error = %e, "scheduler: the scheduled changes could not be read"),
    }
    match done.schedules {
        Ok(done) => log_due(metrics, "experiment schedule", done),
        Err(e) => {
            tracing::warn!(error = %e, "scheduler: the experiments' schedules could not be read")
        }
    }
    let done = match done.rollouts {
        Ok(done) => done,
        Err(e) => {
            tracing::warn!(error = %e, "scheduler: the rollouts could not be read");
            return;
        }
    };
    for (id, outcome) in done {
        log_rollout(metrics, id, outcome);
    }
}

/// Logs and counts what a pass did with one rollout.
fn log_rollout(
    metrics: &SchedulerMetrics,
    id: flowgate_domain::ids::RolloutId,
    outcome: Result<Outcome, flowgate_control::rollouts::RolloutFailure>,
) {
    match outcome {
        Ok(Outcome::Waited(_)) => {}
        Ok(Outcome::Stepped { index, share }) => {
            metrics.count("step");
            tracing::info!(rollout = %id, step = index + 1, share, "rollout: step applied");
        }
        Ok(Outcome::Completed) => {
            metrics.count("completed");
            tracing::info!(rollout = %id, "rollout: completed, the new flow for everyone");
        }
        Ok(Outcome::RolledBack(why)) => {
            metrics.count("rolled_back");
            tracing::warn!(rollout = %id, why = %why, "rollout: rolled back automatically");
        }
        Ok(Outcome::Paused(why)) => {
            metrics.count("paused");
            tracing::warn!(rollout = %id, why = %why, "rollout: paused for a person");
        }
        Ok(Outcome::Abandoned(why)) => {
            metrics.count("abandoned");
            tracing::warn!(rollout = %id, why = %why, "rollout: abandoned");
        }
        Err(e) => {
            metrics.count("failed");
            tracing::warn!(rollout = %id, error = %e, code = e.code(),
                "rollout: not moved this pass; tried again next pass");
        }
    }
}

/// Logs and counts what a pass did with each due `what` (a scheduled change, an experiment's
/// schedule), by its id.
fn log_due<I: std::fmt::Display>(
    metrics: &SchedulerMetrics,
    what: &str,
    done: Vec<(I, flowgate_control::schedules::DueOutcome)>,
) {
    use flowgate_control::schedules::DueOutcome;
    for (id, outcome) in done {
        match outcome {
            DueOutcome::Applied(revision) => {
                metrics.changes("applied");
                tracing::info!(id = %id, revision, "{what} applied");
            }
            DueOutcome::Failed(why) => {
                metrics.changes("failed");
                tracing::warn!(id = %id, why = %why, "{what} failed: it no longer applies");
            }
            DueOutcome::Later(why) => {
                tracing::info!(id = %id, why = %why, "{what}: tried again next pass");
            }
        }
    }
}

/// This process's name in the lease: host, process id and random bits.
fn holder_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "flowgate".to_owned());
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}/{}/{}", std::process::id(), &random[..8])
}
