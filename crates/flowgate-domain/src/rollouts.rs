//! Staged rollouts (D29): a placement rule moves from the flow it serves to another one in
//! steps, read at each with D27's sequential test on its guardrails, rolled back by itself when
//! one gets significantly worse.
//!
//! A rollout runs as a sticky (D23) experiment that replaces the rule's flow (see
//! [`CatalogChange::StartRollout`](crate::catalog::CatalogChange::StartRollout)): its control
//! serves the rule's flow, its treatment the new one, weighted `100 - share` and `share`.
//! Bucketing puts the treatment's range at the end (D5), so raising the share only moves users
//! from the control to the treatment, and a sticky assignment keeps every user where they were
//! first placed: nobody flips back and forth. The experiment's `analysis` names the guardrails
//! (the first as the primary metric), sequential, with the plan's `minimum_users`, so the
//! results' verdict ([`decide`](crate::results::decide)) is what [`next_action`] reads:
//!
//! - `roll_back` (a guardrail significantly worse): roll back at once, whatever the step;
//! - `no_decision` (a sample ratio mismatch): pause for a person;
//! - otherwise, once the current step has been held [`RolloutPlan::hold_secs`] and the
//!   treatment has [`RolloutPlan::minimum_users`]: the next step, one at a time (a step that
//!   fell due while nothing ran waits its own hold after the one before, so no guardrail check
//!   is jumped over); the last step (100%) completes the rollout: the rule serves the new flow
//!   and the experiment ends.
//!
//! This module decides; it writes nothing. The store applies a step in the catalog's write
//! transaction, keyed by `(rollout, step)`, so a step is applied at most once whichever replica
//! tries, however many times (the scheduler in `flowgate serve`).
//!
//! # Versions
//!
//! A rollout is stored with its fields in columns, its plan as JSON and a `format` column
//! ([`ROLLOUT_FORMAT`], D26); a later version may add optional members only.
//!
//! | record | version | written by | what changed |
//! |---|---|---|---|
//! | rollout | 1 | 0.3.0 and later | the first |

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;

use crate::ids::{AppId, ExperimentId, FlowId, RolloutId, VariantId};
use crate::results::{Decision, ExperimentReport, Verdict};

pub use crate::catalog::rollout_plan::{
    RolloutError, RolloutPlan, DEFAULT_GUARDRAILS, DEFAULT_HOLD_SECS, DEFAULT_MINIMUM_USERS,
    DEFAULT_STEPS, MAX_HOLD_SECS, MAX_MINIMUM_USERS, MAX_STEPS, STORE_GUARDRAILS,
};

/// The stored version of a rollout this release writes (see the module's Versions).
pub const ROLLOUT_FORMAT: u32 = 1;

/// The actor of what the scheduler does, in the audit log (D28, D29).
pub const SCHEDULER_ACTOR: &str = "scheduler";

/// `90s`, `15m`, `24h` or `7d` as seconds (a whole number and its unit).
pub fn parse_duration(text: &str) -> Result<u64, RolloutError> {
    let invalid = || RolloutError::InvalidDuration(text.chars().take(64).collect());
    let text = text.trim();
    let unit = text.chars().last().ok_or_else(invalid)?;
    let factor = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err(invalid()),
    };
    let number: u64 = text[..text.len() - 1].parse().map_err(|_| invalid())?;
    number.checked_mul(factor).ok_or_else(invalid)
}

/// A number of seconds as people read it: `90s`, `15m`, `24h`, `1d 2h`.
pub fn format_duration(secs: u64) -> String {
    match secs {
        0 => "0s".to_owned(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// Where a rollout stands (D29).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RolloutState {
    /// Steps are taken as they fall due.
    Running,
    /// Held by a person or a sample ratio mismatch: no step is taken; the experiment keeps
    /// serving its current share.
    Paused,
    /// Rolled back: the rule serves the old flow to everyone; the experiment ended.
    RolledBack,
    /// Completed: the rule serves the new flow to everyone; the experiment ended.
    Completed,
    /// Abandoned: its experiment left the catalog (an import replaced its rule) or ended
    /// without it (concluded by its `ends_at`, stopped by a person), so it can neither step
    /// nor roll back; the rule serves what the catalog says, and the placement is free.
    Abandoned,
}

impl RolloutState {
    /// Every state.
    pub const ALL: [RolloutState; 5] = [
        RolloutState::Running,
        RolloutState::Paused,
        RolloutState::RolledBack,
        RolloutState::Completed,
        RolloutState::Abandoned,
    ];

    /// `running`, `paused`, `rolled_back`, `completed` or `abandoned`.
    pub const fn as_str(self) -> &'static str {
        match self {
            RolloutState::Running => "running",
            RolloutState::Paused => "paused",
            RolloutState::RolledBack => "rolled_back",
            RolloutState::Completed => "completed",
            RolloutState::Abandoned => "abandoned",
        }
    }

    /// Whether the rollout has ended (rolled back, completed or abandoned).
    pub const fn ended(self) -> bool {
        matches!(
            self,
            RolloutState::RolledBack | RolloutState::Completed | RolloutState::Abandoned
        )
    }
}

impl fmt::Display for RolloutState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RolloutState {
    type Err = RolloutError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| RolloutError::UnknownState(s.chars().take(64).collect()))
    }
}

impl Serialize for RolloutState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RolloutState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// A step applied: when, on which catalog revision, and what the guardrails read before it.
#[derive(Clone, Debug, PartialEq)]
pub struct AppliedStep {
    /// The step's position in the plan, from 0.
    pub index: u32,
    /// Its share, in percent.
    pub share: f64,
    /// When it was applied.
    pub applied_at: OffsetDateTime,
    /// The catalog revision it left.
    pub revision: u64,
    /// The guardrails' figures read before it (`null` for the first step).
    pub figures: serde_json::Value,
}

/// A rollout (D29).
#[derive(Clone, Debug, PartialEq)]
pub struct Rollout {
    /// Its id.
    pub id: RolloutId,
    /// The app.
    pub app_id: AppId,
    /// The placement's key.
    pub placement: String,
    /// The experiment it runs as.
    pub experiment_id: ExperimentId,
    /// The experiment's control: the flow the rule served.
    pub control_variant: VariantId,
    /// The experiment's treatment: the new flow.
    pub treatment_variant: VariantId,
    /// The flow the rule served.
    pub from_flow: FlowId,
    /// The flow it moves to.
    pub to_flow: FlowId,
    /// The version of `to_flow` it moves to, which completion publishes; `None`: the version
    /// the flow publishes.
    pub to_version: Option<u32>,
    /// The plan.
    pub plan: RolloutPlan,
    /// Where it stands.
    pub state: RolloutState,
    /// Why it was paused, rolled back or completed, in words; `None` while running as planned.
    pub reason: Option<String>,
    /// Who started it (an email, `cli`).
    pub created_by: String,
    /// When it started.
    pub created_at: OffsetDateTime,
    /// When its state last changed.
    pub updated_at: OffsetDateTime,
    /// The steps applied, in order (the first is applied when the rollout starts).
    pub applied: Vec<AppliedStep>,
}

impl Rollout {
    /// The step the rollout is at (the last applied), if any.
    pub fn current(&self) -> Option<&AppliedStep> {
        self.applied.last()
    }

    /// The share of users on the new flow now, in percent (0 before the first step, and after
    /// a rollback; 100 once completed).
    pub fn share(&self) -> f64 {
        match self.state {
            RolloutState::RolledBack => 0.0,
            RolloutState::Completed => 100.0,
            _ => self.current().map_or(0.0, |s| s.share),
        }
    }

    /// The next step of the plan, `(index, share)`, if one is left.
    pub fn next_step(&self) -> Option<(u32, f64)> {
        let index = self.applied.len();
        self.plan
            .steps
            .get(index)
            .map(|share| (u32::try_from(index).unwrap_or(u32::MAX), *share))
    }

    /// The weights of the experiment at `share` percent: `[control, treatment]`.
    pub fn weights(&self, share: f64) -> Vec<(VariantId, f64)> {
        vec![
            (self.control_variant, 100.0 - share),
            (self.treatment_variant, share),
        ]
    }
}

/// What the guardrails say, read from the rollout experiment's results.
#[derive(Clone, Debug, PartialEq)]
pub struct GuardrailReading {
    /// The results' verdict (D27).
    pub verdict: Verdict,
    /// Its reasons, in words, the deciding ones first.
    pub reasons: Vec<String>,
    /// Users exposed to the new flow.
    pub treatment_users: u64,
    /// The figures to record with a step or a rollback (the report's metrics).
    pub figures: serde_json::Value,
    /// The guardrails that are not optional and have no estimate for the new flow, each in
    /// words with why (D35: such a guardrail holds the next step).
    pub no_data: Vec<String>,
}

impl GuardrailReading {
    /// The reading of a results decision, every guardrail with an estimate.
    pub fn of(decision: &Decision, treatment_users: u64, figures: serde_json::Value) -> Self {
        Self {
            verdict: decision.verdict,
            reasons: decision.reasons.iter().map(|r| r.message.clone()).collect(),
            treatment_users,
            figures,
            no_data: Vec::new(),
        }
    }

    /// The reading of `rollout`'s experiment report: its verdict, the new flow's users and
    /// the guardrails without an estimate for the new flow (a metric the report lacks, one
    /// with no users, or gbstats' "no estimate": zero variance, a control mean of 0), except
    /// those started as optional.
    pub fn read(report: &ExperimentReport, rollout: &Rollout, figures: serde_json::Value) -> Self {
        let treatment_users = report
            .variants
            .iter()
            .find(|v| v.variant_id == rollout.treatment_variant)
            .map_or(0, |v| v.users);
        let no_data = rollout
            .plan
            .guardrails
            .iter()
            .filter(|g| !rollout.plan.is_optional(g))
            .filter_map(|g| {
                let Some(metric) = report.metrics.iter().find(|m| &m.metric == g) else {
                    return Some(format!("{g}: not in the report"));
                };
                let new = metric
                    .variants
                    .iter()
                    .find(|v| v.variant_id == rollout.treatment_variant);
                match new.map(|v| (v.reason(metric.kind), v.comparison)) {
                    Some((None, Some(Ok(_)))) => None,
                    Some((Some(no), _)) | Some((None, Some(Err(no)))) => Some(format!(
                        "{g}: no estimate for the new flow ({}: {no})",
                        no.code()
                    )),
                    _ => Some(format!("{g}: no users of the new flow")),
                }
            })
            .collect();
        Self {
            no_data,
            ..Self::of(&report.decision, treatment_users, figures)
        }
    }
}

/// What the scheduler does next with a rollout.
#[derive(Clone, Debug, PartialEq)]
pub enum NextAction {
    /// Nothing now: `why`, in words; `until` when a time alone is awaited.
    Wait {
        /// When the hold ends, if that is what is awaited.
        until: Option<OffsetDateTime>,
        /// Why, in words.
        why: String,
    },
    /// Apply the plan's step `index` (not the last).
    Step {
        /// The step's position in the plan.
        index: u32,
        /// Its share, in percent.
        share: f64,
    },
    /// Apply the last step: the rule serves the new flow; the experiment ends.
    Complete {
        /// The last step's position in the plan.
        index: u32,
    },
    /// Roll back now: a guardrail is significantly worse (`why` names it with its figures).
    RollBack {
        /// Why, in words.
        why: String,
    },
    /// Pause for a person: the assignment cannot be trusted, or a guardrail has no estimate
    /// (`why` says which, starting with its code: `srm` or `guardrail_no_data`).
    Pause {
        /// Why, in words.
        why: String,
    },
}

/// The reason code of a pause for guardrails without an estimate (D35).
pub const GUARDRAIL_NO_DATA: &str = "guardrail_no_data";

/// What to do with `rollout` at `now`, given what its guardrails read (see the module's
/// documentation for the rules).
pub fn next_action(
    rollout: &Rollout,
    now: OffsetDateTime,
    reading: &GuardrailReading,
) -> NextAction {
    let wait = |until, why: String| NextAction::Wait { until, why };
    if rollout.state != RolloutState::Running {
        return wait(None, format!("the rollout is {}", rollout.state));
    }
    let words = || reading.reasons.join("; ");
    match reading.verdict {
        Verdict::RollBack => return NextAction::RollBack { why: words() },
        Verdict::NoDecision => return NextAction::Pause { why: words() },
        _ => {}
    }
    let Some(current) = rollout.current() else {
        return wait(None, "the rollout has not started".to_owned());
    };
    let Some((index, share)) = rollout.next_step() else {
        return wait(None, "every step is applied".to_owned());
    };
    let hold = time::Duration::seconds(i64::try_from(rollout.plan.hold_secs).unwrap_or(i64::MAX));
    let until = current.applied_at.saturating_add(hold);
    if now < until {
        return wait(
            Some(until),
            format!(
                "step {} ({}%) is held for {}",
                current.index + 1,
                current.share,
                format_duration(rollout.plan.hold_secs)
            ),
        );
    }
    if reading.treatment_users < rollout.plan.minimum_users {
        return wait(
            None,
            format!(
                "{} users have had the new flow, fewer than the {} the next step needs",
                reading.treatment_users, rollout.plan.minimum_users
            ),
        );
    }
    // D35: a step advances only when every guardrail (but the optional ones) has an estimate.
    if !reading.no_data.is_empty() {
        return NextAction::Pause {
            why: format!(
                "{GUARDRAIL_NO_DATA}: the next step needs an estimate of every guardrail; {}",
                reading.no_data.join("; ")
            ),
        };
    }
    if share >= 100.0 {
        NextAction::Complete { index }
    } else {
        NextAction::Step { index, share }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::ids::{AppId, ExperimentId, FlowId, RolloutId, VariantId};

    fn id<T: From<uuid::Uuid>>(n: u128) -> T {
        T::from(uuid::Uuid::from_u128(n))
    }

    fn at(secs: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000 + secs).unwrap()
    }

    fn rollout(applied: &[(f64, i64)]) -> Rollout {
        Rollout {
            id: id::<RolloutId>(1),
            app_id: id::<AppId>(2),
            placement: "paywall".into(),
            experiment_id: id::<ExperimentId>(3),
            control_variant: id::<VariantId>(4),
            treatment_variant: id::<VariantId>(5),
            from_flow: id::<FlowId>(6),
            to_flow: id::<FlowId>(7),
            to_version: None,
            plan: RolloutPlan::new(vec![1.0, 5.0, 100.0], 60, 10, vec![]).unwrap(),
            state: RolloutState::Running,
            reason: None,
            created_by: "cli".into(),
            created_at: at(0),
            updated_at: at(0),
            applied: applied
                .iter()
                .enumerate()
                .map(|(i, (share, secs))| AppliedStep {
                    index: u32::try_from(i).unwrap(),
                    share: *share,
                    applied_at: at(*secs),
                    revision: 1,
                    figures: serde_json::Value::Null,
                })
                .collect(),
        }
    }

    fn reading(verdict: Verdict, users: u64) -> GuardrailReading {
        GuardrailReading {
            verdict,
            reasons: vec!["because".into()],
            treatment_users: users,
            figures: serde_json::Value::Null,
            no_data: Vec::new(),
        }
    }

    #[test]
    fn a_guardrail_without_an_estimate_pauses_the_step_it_would_allow() {
        // D35: with the hold and the users there, a guardrail with no estimate pauses the
        // rollout rather than letting it advance; before that, the rollout just waits.
        let r = rollout(&[(1.0, 0)]);
        let mut blind = reading(Verdict::KeepRunning, 10);
        blind.no_data = vec!["purchase_complete: no estimate for the new flow".into()];
        assert!(matches!(
            next_action(&r, at(59), &blind),
            NextAction::Wait { .. }
        ));
        match next_action(&r, at(60), &blind) {
            NextAction::Pause { why } => {
                assert!(why.starts_with("guardrail_no_data: "), "{why}");
                assert!(why.contains("purchase_complete"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // A guardrail significantly worse still rolls back at once.
        blind.verdict = Verdict::RollBack;
        assert!(matches!(
            next_action(&r, at(60), &blind),
            NextAction::RollBack { .. }
        ));
    }

    #[test]
    fn the_default_guardrails_follow_the_apps_store_revenue() {
        let plan = RolloutPlan::default().for_store_revenue();
        assert_eq!(
            plan.guardrails,
            [
                "flow_complete",
                "purchase_complete",
                "revenue",
                "proceeds",
                "paid"
            ]
        );
        // Chosen guardrails are the operator's: left alone.
        let chosen = RolloutPlan::new(vec![50.0, 100.0], 60, 10, vec!["revenue".into()]).unwrap();
        assert_eq!(chosen.clone().for_store_revenue(), chosen);
    }

    #[test]
    fn optional_guardrails_are_among_the_plans() {
        let plan = RolloutPlan::new(vec![50.0, 100.0], 60, 10, vec![]).unwrap();
        let plan = plan.with_optional(vec!["revenue".into()]).unwrap();
        assert!(plan.is_optional("revenue") && !plan.is_optional("flow_complete"));
        let refused = |o: &[&str]| {
            RolloutPlan::default()
                .with_optional(o.iter().map(|g| (*g).to_owned()).collect())
                .unwrap_err()
                .to_string()
        };
        assert!(refused(&["paid"]).contains("also be one of the rollout's guardrails"));
        assert!(refused(&["revenue", "revenue"]).contains("listed twice"));
        // Stored only when given: a plan without them reads and writes as version 1 did.
        let json = serde_json::to_value(RolloutPlan::default()).unwrap();
        assert!(json.get("optional_guardrails").is_none(), "{json}");
        let back: RolloutPlan =
            serde_json::from_value(serde_json::to_value(&plan).unwrap()).unwrap();
        assert_eq!(back, plan);
    }

    #[test]
    fn a_step_waits_its_hold_and_its_users_then_the_last_completes() {
        let r = rollout(&[(1.0, 0)]);
        let fine = reading(Verdict::KeepRunning, 10);
        assert!(matches!(
            next_action(&r, at(59), &fine),
            NextAction::Wait { until: Some(u), .. } if u == at(60)
        ));
        assert_eq!(
            next_action(&r, at(60), &fine),
            NextAction::Step {
                index: 1,
                share: 5.0
            }
        );
        let few = reading(Verdict::KeepRunning, 9);
        assert!(matches!(
            next_action(&r, at(600), &few),
            NextAction::Wait { until: None, .. }
        ));
        // Overdue by far: still one step, held again from when it is applied.
        let r = rollout(&[(1.0, 0), (5.0, 3600)]);
        assert_eq!(
            next_action(&r, at(100_000), &fine),
            NextAction::Complete { index: 2 }
        );
        assert!(matches!(
            next_action(&r, at(3601), &fine),
            NextAction::Wait { .. }
        ));
    }

    #[test]
    fn a_worse_guardrail_rolls_back_at_once_and_a_mismatch_pauses() {
        let r = rollout(&[(1.0, 0)]);
        assert_eq!(
            next_action(&r, at(1), &reading(Verdict::RollBack, 0)),
            NextAction::RollBack {
                why: "because".into()
            }
        );
        assert_eq!(
            next_action(&r, at(1), &reading(Verdict::NoDecision, 0)),
            NextAction::Pause {
                why: "because".into()
            }
        );
        let mut paused = r.clone();
        paused.state = RolloutState::Paused;
        assert!(matches!(
            next_action(&paused, at(1000), &reading(Verdict::RollBack, 100)),
            NextAction::Wait { .. }
        ));
    }

    #[test]
    fn plans_are_checked() {
        let plan = |steps: Vec<f64>| RolloutPlan::new(steps, 60, 1, vec![]);
        assert!(plan(vec![100.0]).is_ok());
        for bad in [
            vec![],
            vec![5.0, 1.0, 100.0],
            vec![1.0, 50.0],
            vec![0.0, 100.0],
        ] {
            assert!(
                matches!(plan(bad.clone()), Err(RolloutError::InvalidSteps { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(
            RolloutPlan::new(vec![100.0], 60, 1, vec![])
                .unwrap()
                .guardrails,
            DEFAULT_GUARDRAILS
        );
        let unknown = RolloutPlan::new(vec![100.0], 60, 1, vec!["clicks".into()]).unwrap_err();
        assert!(unknown.to_string().contains("clicks"), "{unknown}");
        let twice = vec!["revenue".to_owned(), "revenue".to_owned()];
        assert!(RolloutPlan::new(vec![100.0], 60, 1, twice).is_err());
        assert_eq!(
            RolloutPlan::new(vec![100.0], 60, 0, vec![]),
            Err(RolloutError::InvalidMinimumUsers(0))
        );
    }

    /// Issue 65: a plan waits for at most the users a catalog file accepts as its experiment's
    /// `analysis.minimum_users`; `--minimum-users 18446744073709551615` was written into the
    /// catalog, whose export then did not import.
    #[test]
    fn minimum_users_stay_within_what_a_catalog_file_accepts() {
        let catalog = |minimum: u64| {
            crate::catalog::CatalogFile::parse(&format!(
                r#"{{"format": 2, "workspaces": [{{"id": "10000000-0000-4000-8000-000000000001",
                "name": "A", "apps": [{{"id": "20000000-0000-4000-8000-000000000001",
                "name": "a", "media_base_url": "https://m", "icon_base_url": "https://i",
                "placements": [{{"key": "p", "rules": [{{"experiment": {{
                "id": "30000000-0000-4000-8000-000000000001", "name": "e", "status": "running",
                "variants": [], "analysis": {{"minimum_users": {minimum}}}}}}}]}}]}}]}}]}}"#
            ))
        };
        assert!(catalog(MAX_MINIMUM_USERS).is_ok());
        assert!(catalog(MAX_MINIMUM_USERS + 1).is_err());
        let plan = RolloutPlan::new(vec![100.0], 60, MAX_MINIMUM_USERS, vec![]).unwrap();
        assert_eq!(plan.minimum_users, MAX_MINIMUM_USERS);
        for refused in [MAX_MINIMUM_USERS + 1, 99_999_999_999, u64::MAX] {
            let err = RolloutPlan::new(vec![100.0], 60, refused, vec![]).unwrap_err();
            assert_eq!(err, RolloutError::InvalidMinimumUsers(refused));
            assert_eq!(
                err.to_string(),
                format!("minimum users must be from 1 to 4294967295, not {refused}")
            );
        }
    }

    #[test]
    fn durations_read_and_write() {
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("15m"), Ok(900));
        assert_eq!(parse_duration("24h"), Ok(86_400));
        assert_eq!(parse_duration("7d"), Ok(604_800));
        for bad in ["", "h", "1.5h", "-1s", "10", "10w"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(format_duration(86_400), "1d");
        assert_eq!(format_duration(7200), "2h");
        assert_eq!(format_duration(90), "90s");
        assert_eq!("rolled_back".parse(), Ok(RolloutState::RolledBack));
    }
}
