//! The verdict of an experiment (D27) and its reasons: what [`decide`](super::decide) writes
//! into a report. Types only, so that the report can hold one and the rules can read the
//! report without a circle between them.

use crate::ids::VariantId;

/// The verdict of a [`Decision`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Ship the decision's variant.
    Ship,
    /// Roll back to the control.
    RollBack,
    /// Not enough evidence yet: keep the experiment running.
    KeepRunning,
    /// The figures cannot be trusted (sample ratio mismatch).
    NoDecision,
}

impl Verdict {
    /// `ship`, `roll_back`, `keep_running` or `no_decision` (D27).
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Ship => "ship",
            Verdict::RollBack => "roll_back",
            Verdict::KeepRunning => "keep_running",
            Verdict::NoDecision => "no_decision",
        }
    }
}

/// What to do with an experiment, and why (D27).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Decision {
    /// What to do.
    pub verdict: Verdict,
    /// With `ship`, the treatment to ship; with a `roll_back` for a guardrail, the first
    /// treatment (in the catalog's order) whose guardrail is significantly worse; otherwise
    /// `None`.
    pub variant_id: Option<VariantId>,
    /// Why, each with its metric, variant and figures in words; the deciding ones first.
    pub reasons: Vec<Reason>,
}

impl Decision {
    /// A placeholder while a report is assembled, before [`decide`] reads it.
    pub(crate) fn pending() -> Self {
        Decision {
            verdict: Verdict::NoDecision,
            variant_id: None,
            reasons: Vec::new(),
        }
    }
}

/// One reason of a [`Decision`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reason {
    /// A stable code: `srm`, `minimum_users`, `guardrail_worse`, `primary_worse`,
    /// `primary_better`, `no_significant_difference` or `metric_missing`.
    pub code: &'static str,
    /// What it means, with the metric, the variant's name and the figures.
    pub message: String,
    /// The metric it is about, if any.
    pub metric: Option<String>,
    /// The variant it is about, if any.
    pub variant_id: Option<VariantId>,
}

impl Reason {
    pub(super) fn new(
        code: &'static str,
        message: String,
        metric: Option<&str>,
        variant_id: Option<VariantId>,
    ) -> Self {
        Self {
            code,
            message,
            metric: metric.map(str::to_owned),
            variant_id,
        }
    }
}
