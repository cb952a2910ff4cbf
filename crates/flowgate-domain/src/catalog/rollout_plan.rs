//! A staged rollout's plan (D29): its steps, hold, minimum users and guardrails, checked.
//!
//! It lives below the catalog, and `crate::rollouts` re-exports it, because a rollout start
//! proposed for review (D35) carries its plan in the catalog change that starts it
//! ([`CatalogChange::StartRollout`](super::CatalogChange::StartRollout)): the catalog needs the
//! plan's type, and the rollouts read the catalog, never the other way round.

use serde::{Deserialize, Serialize};

/// The plan's steps when none are given: the share of users on the new flow, in percent.
pub const DEFAULT_STEPS: [f64; 5] = [1.0, 5.0, 25.0, 50.0, 100.0];
/// How long each step is held at least when not given: 24 hours.
pub const DEFAULT_HOLD_SECS: u64 = 24 * 3600;
/// Users the new flow needs before the next step when not given.
pub const DEFAULT_MINIMUM_USERS: u64 = 100;
/// The guardrails when none are given.
pub const DEFAULT_GUARDRAILS: [&str; 3] = ["flow_complete", "purchase_complete", "revenue"];
/// The guardrails the defaults gain for an app whose stores report its revenue (D30, D35): what
/// the stores say it earned and how many paid, beside what the app reported.
pub const STORE_GUARDRAILS: [&str; 2] = ["proceeds", "paid"];
/// Most steps a plan may have.
pub const MAX_STEPS: usize = 20;
/// The longest hold: 90 days.
pub const MAX_HOLD_SECS: u64 = 90 * 24 * 3600;
/// The most users a plan may wait for: the most a catalog file accepts as an experiment's
/// `analysis.minimum_users` (a `u32`), which the rollout's experiment carries, so that an
/// export of the catalog imports again.
pub const MAX_MINIMUM_USERS: u64 = u32::MAX as u64;

/// A plan or duration that is not acceptable; each quotes the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RolloutError {
    /// The steps are not increasing shares ending at 100.
    #[error("invalid steps {steps}: {reason}")]
    InvalidSteps {
        /// The steps as given.
        steps: String,
        /// What is wrong.
        reason: String,
    },
    /// A hold out of range.
    #[error("the hold must be from 0 s to 90 days, not {0} s")]
    InvalidHold(u64),
    /// `minimum_users` of 0, or above [`MAX_MINIMUM_USERS`].
    #[error("minimum users must be from 1 to {MAX_MINIMUM_USERS}, not {0}")]
    InvalidMinimumUsers(u64),
    /// A guardrail that is not a metric, or one given twice.
    #[error("invalid guardrail {name:?}: {reason}")]
    InvalidGuardrail {
        /// The name given.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A duration that does not parse.
    #[error("{0:?} is not a duration: a whole number and s, m, h or d (90s, 15m, 24h, 7d)")]
    InvalidDuration(String),
    /// A state name that does not parse.
    #[error("{0:?} is not a rollout state (running, paused, rolled_back, completed, abandoned)")]
    UnknownState(String),
}

/// How a rollout proceeds (D29).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RolloutPlan {
    /// The share of users on the new flow at each step, in percent: increasing, each above 0,
    /// the last 100.
    pub steps: Vec<f64>,
    /// How long each step is held at least, in seconds.
    pub hold_secs: u64,
    /// Users the new flow needs before the next step (and each variant before a verdict).
    pub minimum_users: u64,
    /// The metrics that must not get significantly worse: an SDK event type, a store metric
    /// or `revenue`.
    pub guardrails: Vec<String>,
    /// The guardrails (of `guardrails`) started as optional: one without an estimate does not
    /// hold a step (D35). Stored only when not empty (an optional member of version 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optional_guardrails: Vec<String>,
}

impl Default for RolloutPlan {
    fn default() -> Self {
        Self {
            steps: DEFAULT_STEPS.to_vec(),
            hold_secs: DEFAULT_HOLD_SECS,
            minimum_users: DEFAULT_MINIMUM_USERS,
            guardrails: DEFAULT_GUARDRAILS.iter().map(|g| (*g).to_owned()).collect(),
            optional_guardrails: Vec::new(),
        }
    }
}

impl RolloutPlan {
    /// A plan, checked: `steps` increasing, each above 0 and at most 100, the last 100, at most
    /// [`MAX_STEPS`]; a hold up to [`MAX_HOLD_SECS`]; `minimum_users` from 1 to
    /// [`MAX_MINIMUM_USERS`]; each
    /// guardrail a metric, none twice (at least one: the defaults when none are given).
    pub fn new(
        steps: Vec<f64>,
        hold_secs: u64,
        minimum_users: u64,
        guardrails: Vec<String>,
    ) -> Result<Self, RolloutError> {
        let shown = || {
            steps
                .iter()
                .map(f64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let invalid = |reason: &str| RolloutError::InvalidSteps {
            steps: shown(),
            reason: reason.to_owned(),
        };
        if steps.is_empty() || steps.len() > MAX_STEPS {
            return Err(invalid(&format!("1 to {MAX_STEPS} steps")));
        }
        if steps
            .iter()
            .any(|s| !(s.is_finite() && *s > 0.0 && *s <= 100.0))
        {
            return Err(invalid("each step is a share above 0 and at most 100"));
        }
        if steps.windows(2).any(|w| w[1] <= w[0]) {
            return Err(invalid("each step is larger than the one before"));
        }
        if steps.last() != Some(&100.0) {
            return Err(invalid("the last step is 100: the new flow for everyone"));
        }
        if hold_secs > MAX_HOLD_SECS {
            return Err(RolloutError::InvalidHold(hold_secs));
        }
        if !(1..=MAX_MINIMUM_USERS).contains(&minimum_users) {
            return Err(RolloutError::InvalidMinimumUsers(minimum_users));
        }
        let guardrails = if guardrails.is_empty() {
            RolloutPlan::default().guardrails
        } else {
            guardrails
        };
        for (i, name) in guardrails.iter().enumerate() {
            if guardrails[..i].contains(name) {
                return Err(RolloutError::InvalidGuardrail {
                    name: name.clone(),
                    reason: "listed twice".to_owned(),
                });
            }
            if let Err(names) = super::check_metric(name) {
                return Err(RolloutError::InvalidGuardrail {
                    name: name.clone(),
                    reason: format!("not a metric: one of {names}"),
                });
            }
        }
        Ok(Self {
            steps,
            hold_secs,
            minimum_users,
            guardrails,
            optional_guardrails: Vec::new(),
        })
    }

    /// The plan with `optional` among its guardrails marked optional (D35): each must be one of
    /// the plan's guardrails. Without an estimate, an optional guardrail does not hold a step;
    /// significantly worse, it still rolls back.
    pub fn with_optional(mut self, optional: Vec<String>) -> Result<Self, RolloutError> {
        for (i, name) in optional.iter().enumerate() {
            let reason = if optional[..i].contains(name) {
                "listed twice"
            } else if !self.guardrails.contains(name) {
                "an optional guardrail must also be one of the rollout's guardrails"
            } else {
                continue;
            };
            return Err(RolloutError::InvalidGuardrail {
                name: name.clone(),
                reason: reason.to_owned(),
            });
        }
        self.optional_guardrails = optional;
        Ok(self)
    }

    /// Whether `guardrail` was started as optional.
    pub fn is_optional(&self, guardrail: &str) -> bool {
        self.optional_guardrails.iter().any(|g| g == guardrail)
    }

    /// The plan for an app whose stores report its revenue (D35: the default guardrails follow
    /// the app): a plan guarded by the defaults gains [`STORE_GUARDRAILS`]; one whose
    /// guardrails were chosen is left as it is.
    pub fn for_store_revenue(mut self) -> Self {
        if self.guardrails == DEFAULT_GUARDRAILS {
            self.guardrails
                .extend(STORE_GUARDRAILS.iter().map(|g| (*g).to_owned()));
        }
        self
    }
}
