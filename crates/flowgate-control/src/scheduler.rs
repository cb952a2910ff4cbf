//! The scheduler's pass (D29): what the replica holding the scheduler's lease does each
//! interval. It applies the scheduled changes due ([`schedules::apply_due`]), starts and
//! concludes experiments on their schedule ([`schedules::apply_experiment_schedules`]) and
//! moves the running rollouts ([`rollouts::tick`]). The lease, the interval and the logging
//! are the process's (the binary's `scheduler`); exactly once is the store's, since each step
//! is recorded in the transaction of its catalog change (the [`CatalogWriter`] port).
//!
//! [`CatalogWriter`]: flowgate_domain::ports::CatalogWriter

use std::time::Duration;

use flowgate_domain::ids::{ChangeId, ExperimentId, RolloutId};
use flowgate_domain::ports::{ResultsSource, StoreError};
use time::OffsetDateTime;

use crate::results::ResultsSettings;
use crate::rollouts::{self, Outcome, RolloutFailure};
use crate::schedules::{self, DueOutcome, ScheduleWatch};
use crate::ControlStore;

/// What a rollout did in a pass, or why it did not move.
pub type RolloutMoved = Result<Outcome, RolloutFailure>;

/// What one pass did, part by part; a part that could not be read says why.
#[derive(Debug)]
pub struct Pass {
    /// The scheduled changes due, each with what became of it.
    pub changes: Result<Vec<(ChangeId, DueOutcome)>, StoreError>,
    /// The experiments whose `starts_at` or `ends_at` came, each with what became of it.
    pub schedules: Result<Vec<(ExperimentId, DueOutcome)>, StoreError>,
    /// The running rollouts, each with what it did or why it did not move this pass.
    pub rollouts: Result<Vec<(RolloutId, RolloutMoved)>, StoreError>,
}

/// What the pass reads beside the store: the results (a rollout's guardrails), how they are
/// reported, and how long a rollout's step settles before its figures count.
pub struct PassInputs<'a> {
    /// The experiments' figures.
    pub reader: &'a dyn ResultsSource,
    /// Currency, exchange rates and the store revenue horizon.
    pub results: &'a ResultsSettings,
    /// The time after a step before its figures are read.
    pub settle: Duration,
}

/// One pass at `now`: the scheduled changes due, the experiments' schedules, then the running
/// rollouts. `watch` carries what the last pass learnt of the experiments' schedules, so a
/// pass with nothing due reads only the catalog's revision.
pub async fn pass(
    store: &dyn ControlStore,
    inputs: &PassInputs<'_>,
    now: OffsetDateTime,
    watch: &mut ScheduleWatch,
) -> Pass {
    let changes = schedules::apply_due(store, now).await;
    let schedules = schedules::apply_experiment_schedules(store, now, watch).await;
    let rollouts = rollouts::tick(store, inputs.reader, inputs.results, inputs.settle, now).await;
    Pass {
        changes,
        schedules,
        rollouts,
    }
}
