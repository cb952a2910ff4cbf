//! What to do with an experiment (D27): ship a treatment, roll back, keep running, or no
//! decision, read from a report's warnings, users and comparisons.
//!
//! The rules are [`decide`]'s.

use super::report::{ExperimentReport, MetricReport, MetricVariant};
use super::stats::{fisher_exact, Estimate, MetricKind, NoEstimate, ALPHA};
use super::verdict::{Decision, Reason, Verdict};
use crate::catalog::AnalysisSettings;
use crate::ids::VariantId;

/// Decides what to do with the experiment of `report` under `settings`, by D27's rules.
///
/// The rules, in order (the first that applies decides):
/// 1. `no_decision` while the report carries the sample ratio mismatch warning (`srm`): the
///    assignment is broken and the figures cannot be trusted.
/// 2. `keep_running` while a variant has fewer than [`AnalysisSettings::minimum_users`].
/// 3. `roll_back` when any treatment's guardrail metric is significantly worse than the
///    control's, or when every treatment's primary metric is.
/// 4. `ship` the treatment whose primary metric is significantly better with no guardrail
///    significantly worse; among several, the highest chance to win (the first in the
///    catalog's order on a tie).
/// 5. Otherwise `keep_running`.
///
/// "Significantly worse" is a comparison whose interval lies entirely below 0 (`ci_high < 0`),
/// "significantly better" entirely above 0 (`ci_low > 0`); a comparison without an estimate
/// (a reason instead of figures) is neither. The intervals are the report's, so the report's
/// method (sequential or fixed horizon) is the one read. A primary or guardrail metric the
/// report lacks is named in a `metric_missing` reason and never read as worse or better; without
/// its primary metric nothing ships (`keep_running`).
pub fn decide(report: &ExperimentReport, settings: &AnalysisSettings) -> Decision {
    if let Some(decision) = srm(report) {
        return decision;
    }
    if let Some(decision) = too_few_users(report, settings) {
        return decision;
    }

    let names = Names(report);
    let mut missing = Vec::new();
    let mut guardrails_worse = guardrails_worse(report, settings, &names, &mut missing);
    let primary = find_metric(report, &settings.primary_metric);
    if primary.is_none() {
        missing.push(metric_missing(&settings.primary_metric, "primary"));
    }
    if let Some(first) = guardrails_worse.first() {
        let variant_id = first.variant_id;
        guardrails_worse.append(&mut missing);
        return decision(Verdict::RollBack, variant_id, guardrails_worse);
    }
    let Some(primary) = primary else {
        return decision(Verdict::KeepRunning, None, missing);
    };

    let treatments = estimates(primary);
    if let Some(mut reasons) = primary_worse_everywhere(&names, primary, &treatments) {
        reasons.append(&mut missing);
        return decision(Verdict::RollBack, None, reasons);
    }
    if let Some((winner, mut reasons)) = ship(&names, primary, &treatments, &guardrails_worse) {
        reasons.append(&mut missing);
        return decision(Verdict::Ship, Some(winner), reasons);
    }
    let mut reasons = keep_running(&names, primary, &treatments);
    reasons.append(&mut missing);
    decision(Verdict::KeepRunning, None, reasons)
}

fn decision(verdict: Verdict, variant_id: Option<VariantId>, reasons: Vec<Reason>) -> Decision {
    Decision {
        verdict,
        variant_id,
        reasons,
    }
}

/// A treatment of a metric with its estimate against the control, or why there is none.
type Treatment<'a> = (&'a MetricVariant, Result<Estimate, NoEstimate>);

/// Rule 1: the sample ratio mismatch warning, under which nothing can be trusted.
fn srm(report: &ExperimentReport) -> Option<Decision> {
    let srm = report.warnings.iter().find(|w| w.code == "srm")?;
    let reason = Reason::new("srm", srm.message.clone(), None, None);
    Some(decision(Verdict::NoDecision, None, vec![reason]))
}

/// Rule 2: every variant needs `minimum_users`; keep running while one has fewer.
fn too_few_users(report: &ExperimentReport, settings: &AnalysisSettings) -> Option<Decision> {
    let short: Vec<Reason> = report
        .variants
        .iter()
        .filter(|v| v.users < settings.minimum_users)
        .map(|v| {
            Reason::new(
                "minimum_users",
                format!(
                    "{} has {} users, fewer than the {} each variant needs before a verdict",
                    v.name, v.users, settings.minimum_users
                ),
                None,
                Some(v.variant_id),
            )
        })
        .collect();
    (!short.is_empty()).then(|| decision(Verdict::KeepRunning, None, short))
}

/// The report's metric named `name`, if it has one.
fn find_metric<'a>(report: &'a ExperimentReport, name: &str) -> Option<&'a MetricReport> {
    report.metrics.iter().find(|m| m.metric == name)
}

/// The reason naming a metric of `role` (primary or guardrail) the report lacks.
fn metric_missing(name: &str, role: &str) -> Reason {
    Reason::new(
        "metric_missing",
        format!("{name}: the {role} metric is not in the report, so it is not read"),
        Some(name),
        None,
    )
}

/// Rule 3a: each treatment's guardrail metric that is significantly worse than the
/// control's. A guardrail the report lacks is added to `missing`.
fn guardrails_worse(
    report: &ExperimentReport,
    settings: &AnalysisSettings,
    names: &Names<'_>,
    missing: &mut Vec<Reason>,
) -> Vec<Reason> {
    let mut worse = Vec::new();
    for name in &settings.guardrail_metrics {
        let Some(metric) = find_metric(report, name) else {
            missing.push(metric_missing(name, "guardrail"));
            continue;
        };
        for (v, e) in estimates(metric) {
            if let Some(words) = names.significantly_worse(metric, v, &e) {
                worse.push(Reason::new(
                    "guardrail_worse",
                    format!("guardrail {words}"),
                    Some(&metric.metric),
                    Some(v.variant_id),
                ));
            }
        }
    }
    worse
}

/// Rule 3b: the reasons to roll back when every treatment's primary metric is significantly
/// worse than the control's; `None` when one is not (or there is no treatment).
fn primary_worse_everywhere(
    names: &Names<'_>,
    primary: &MetricReport,
    treatments: &[Treatment<'_>],
) -> Option<Vec<Reason>> {
    let worse: Vec<Reason> = treatments
        .iter()
        .filter_map(|(v, e)| {
            Some(Reason::new(
                "primary_worse",
                names.significantly_worse(primary, v, e)?,
                Some(&primary.metric),
                Some(v.variant_id),
            ))
        })
        .collect();
    (!treatments.is_empty() && worse.len() == treatments.len()).then_some(worse)
}

/// Rule 4: the significantly better treatment with the highest chance to win, and the reasons
/// naming every significantly better one; `None` when there is none. A treatment with a
/// guardrail significantly worse has rolled back by rule 3a; the filter keeps the rule whole
/// should the order change.
fn ship(
    names: &Names<'_>,
    primary: &MetricReport,
    treatments: &[Treatment<'_>],
    guardrails_worse: &[Reason],
) -> Option<(VariantId, Vec<Reason>)> {
    let mut better: Vec<(&MetricVariant, Estimate)> = treatments
        .iter()
        .filter_map(|(v, e)| Some((*v, *e.as_ref().ok().filter(|e| e.ci_low > 0.0)?)))
        .filter(|(v, _)| {
            !guardrails_worse
                .iter()
                .any(|r| r.variant_id == Some(v.variant_id))
        })
        .collect();
    // Stable: on a tie the first in the catalog's order stays first.
    better.sort_by(|a, b| b.1.chance_to_win.total_cmp(&a.1.chance_to_win));
    let winner = better.first()?.0.variant_id;
    let reasons = better
        .iter()
        .map(|(v, e)| {
            Reason::new(
                "primary_better",
                format!(
                    "{}; chance to win {}",
                    names.better(&primary.metric, v.variant_id, e),
                    percent(e.chance_to_win)
                ),
                Some(&primary.metric),
                Some(v.variant_id),
            )
        })
        .collect();
    Some((winner, reasons))
}

/// Rule 5: nothing significant enough, so keep running; one reason per treatment saying how
/// its primary metric compares.
fn keep_running(
    names: &Names<'_>,
    primary: &MetricReport,
    treatments: &[Treatment<'_>],
) -> Vec<Reason> {
    treatments
        .iter()
        .map(
            |(v, e)| match (names.significantly_worse(primary, v, e), e) {
                (Some(words), _) => Reason::new(
                    "primary_worse",
                    words,
                    Some(&primary.metric),
                    Some(v.variant_id),
                ),
                (None, Ok(e)) => Reason::new(
                    "no_significant_difference",
                    format!(
                        "{}: {} differs from {} by {} (95% interval {} to {}), not significantly",
                        primary.metric,
                        names.of(v.variant_id),
                        names.control(),
                        relative_percent(e.lift),
                        relative_percent(e.ci_low),
                        relative_percent(e.ci_high),
                    ),
                    Some(&primary.metric),
                    Some(v.variant_id),
                ),
                (None, Err(no)) => Reason::new(
                    "no_significant_difference",
                    format!(
                        "{}: {} has no estimate against {} ({}: {no})",
                        primary.metric,
                        names.of(v.variant_id),
                        names.control(),
                        no.code(),
                    ),
                    Some(&primary.metric),
                    Some(v.variant_id),
                ),
            },
        )
        .collect()
}

/// The treatments of `metric` (every variant but the control) with their estimates or why
/// there is none.
fn estimates(metric: &MetricReport) -> Vec<(&MetricVariant, Result<Estimate, NoEstimate>)> {
    metric
        .variants
        .iter()
        .skip(1)
        .map(|v| {
            let estimate = match (v.reason(metric.kind), v.comparison) {
                (Some(no), _) => Err(no),
                (None, Some(Ok(e))) => Ok(e),
                (None, Some(Err(no))) => Err(no),
                // A treatment row always has a comparison; without one it has no users.
                (None, None) => Err(NoEstimate::NoUsers),
            };
            (v, estimate)
        })
        .collect()
}

/// Helpers naming variants and figures in words.
struct Names<'a>(&'a ExperimentReport);

impl Names<'_> {
    fn of(&self, id: VariantId) -> String {
        self.0
            .variants
            .iter()
            .find(|v| v.variant_id == id)
            .map_or_else(|| id.to_string(), |v| v.name.clone())
    }

    fn control(&self) -> String {
        self.0
            .variants
            .first()
            .map_or_else(|| "the control".to_owned(), |v| v.name.clone())
    }

    /// Why treatment `v` is significantly worse than the control on `metric`, in words, or
    /// `None`: its interval lies entirely below 0, or (D35) it has none of a conversion the
    /// control has and Fisher's exact test finds the difference at [`ALPHA`] (gbstats gives no
    /// estimate there: a variance of 0).
    fn significantly_worse(
        &self,
        metric: &MetricReport,
        v: &MetricVariant,
        e: &Result<Estimate, NoEstimate>,
    ) -> Option<String> {
        match e {
            Ok(e) if e.ci_high < 0.0 => return Some(self.worse(&metric.metric, v.variant_id, e)),
            Ok(_) | Err(NoEstimate::Overflow) => return None,
            Err(_) => {}
        }
        let control = metric.variants.first()?.sums;
        let treatment = v.sums;
        if metric.kind != MetricKind::Conversion || treatment.sum != 0.0 || control.sum <= 0.0 {
            return None;
        }
        if treatment.users == 0 || control.users == 0 {
            return None;
        }
        // A conversion's sum is its count of converted users.
        let converted = control.sum.round() as u64;
        let p_value = fisher_exact(0, treatment.users, converted, control.users);
        (p_value < ALPHA).then(|| {
            format!(
                "{}: {} has no conversions (0 of {} users) where {} has {} ({} of {}); \
                 Fisher's exact test p = {p_value:.2e}",
                metric.metric,
                self.of(v.variant_id),
                treatment.users,
                self.control(),
                percent(control.sum / control.users as f64),
                converted,
                control.users,
            )
        })
    }

    fn better(&self, metric: &str, id: VariantId, e: &Estimate) -> String {
        self.compared(metric, id, e, "better")
    }

    fn worse(&self, metric: &str, id: VariantId, e: &Estimate) -> String {
        self.compared(metric, id, e, "worse")
    }

    fn compared(&self, metric: &str, id: VariantId, e: &Estimate, word: &str) -> String {
        format!(
            "{metric}: {} is {} {word} than {} (95% interval {} to {})",
            self.of(id),
            percent(e.lift.abs()),
            self.control(),
            relative_percent(e.ci_low),
            relative_percent(e.ci_high),
        )
    }
}

/// A relative figure (a lift or an interval's end) as people read it: clamped at -100%, below
/// which no non-negative metric can fall (D35; the JSON keeps gbstats' figures).
pub fn relative_percent(x: f64) -> String {
    percent(x.max(-1.0))
}

/// `0.123` as `12.3%`; never `-0.0%`.
fn percent(x: f64) -> String {
    let p = (x * 1000.0).round() / 10.0;
    let p = if p == 0.0 { 0.0 } else { p };
    format!("{p:.1}%")
}

#[cfg(test)]
mod tests {
    use time::OffsetDateTime;
    use uuid::Uuid;

    use super::*;
    use crate::catalog::ExperimentStatus;
    use crate::ids::{AppId, ExperimentId};
    use crate::results::report::{VariantRow, Warning};
    use crate::results::stats::{MetricKind, VariantSums};

    fn vid(n: u128) -> VariantId {
        VariantId::from_uuid(Uuid::from_u128(n))
    }

    /// A comparison `(lift, ci_low, ci_high, chance_to_win)`, or `None` for no estimate.
    type Cmp = Option<(f64, f64, f64, f64)>;

    /// A report of the variants `names` (the control first, ids 1, 2, …) with `users` each,
    /// and the metrics given as the treatments' comparisons.
    fn report(names: &[&str], users: u64, metrics: &[(&str, &[Cmp])]) -> ExperimentReport {
        let sums = VariantSums {
            users,
            sum: users as f64 / 2.0,
            sum_squares: users as f64 / 2.0,
        };
        ExperimentReport {
            experiment_id: ExperimentId::from_uuid(Uuid::from_u128(100)),
            name: "paywall".to_owned(),
            app_id: AppId::from_uuid(Uuid::from_u128(200)),
            status: ExperimentStatus::Running,
            from: OffsetDateTime::UNIX_EPOCH,
            to: OffsetDateTime::UNIX_EPOCH,
            currency: "USD".to_owned(),
            exposed_users: users * names.len() as u64,
            multiple_exposures: 0,
            unconverted_purchases: 0,
            srm_p_value: 0.5,
            warnings: Vec::new(),
            variants: names
                .iter()
                .enumerate()
                .map(|(i, name)| VariantRow {
                    variant_id: vid(i as u128 + 1),
                    name: (*name).to_owned(),
                    weight: 1.0 / names.len() as f64,
                    users,
                })
                .collect(),
            metrics: metrics
                .iter()
                .map(|(metric, cmps)| MetricReport {
                    metric: (*metric).to_owned(),
                    kind: MetricKind::Conversion,
                    variants: std::iter::once(None)
                        .chain(cmps.iter().map(|c| {
                            Some(c.map_or(Err(NoEstimate::ZeroVariance), |(l, lo, hi, ctw)| {
                                Ok(Estimate {
                                    lift: l,
                                    ci_low: lo,
                                    ci_high: hi,
                                    p_value: 0.01,
                                    chance_to_win: ctw,
                                    credible_low: lo,
                                    credible_high: hi,
                                })
                            }))
                        }))
                        .enumerate()
                        .map(|(i, comparison)| MetricVariant {
                            variant_id: vid(i as u128 + 1),
                            sums,
                            mean: 0.5,
                            comparison,
                        })
                        .collect(),
                })
                .collect(),
            daily: Vec::new(),
            method: crate::results::Method::FixedHorizon,
            analysis: AnalysisSettings::default(),
            decision: Decision::pending(),
        }
    }

    const BETTER: Cmp = Some((0.123, 0.041, 0.205, 0.99));
    const WORSE: Cmp = Some((-0.081, -0.14, -0.022, 0.01));
    const FLAT: Cmp = Some((0.012, -0.03, 0.054, 0.7));
    const PRIMARY: &str = "purchase_complete";

    fn guarded() -> AnalysisSettings {
        AnalysisSettings {
            guardrail_metrics: vec!["flow_complete".to_owned()],
            ..AnalysisSettings::default()
        }
    }

    #[test]
    fn defaults_are_d27s() {
        let s = AnalysisSettings::default();
        assert_eq!(s.primary_metric, "purchase_complete");
        assert!(s.guardrail_metrics.is_empty());
        assert!(s.sequential);
        assert_eq!(s.minimum_users, 100);
        assert_eq!(Verdict::RollBack.as_str(), "roll_back");
        assert_eq!(Verdict::KeepRunning.as_str(), "keep_running");
        assert_eq!(Verdict::NoDecision.as_str(), "no_decision");
        assert_eq!(Verdict::Ship.as_str(), "ship");
    }

    /// The report of one treatment against the control on `PRIMARY` as a guardrail, with
    /// these conversions (converted, users) and gbstats' "no estimate" for the treatment.
    fn zero_rate(control: (u64, u64), treatment: (u64, u64)) -> ExperimentReport {
        let mut r = report(&["current", "new"], 10, &[(PRIMARY, &[None])]);
        let conv = |(c, n): (u64, u64)| VariantSums {
            users: n,
            sum: c as f64,
            sum_squares: c as f64,
        };
        r.metrics[0].variants[0].sums = conv(control);
        r.metrics[0].variants[1].sums = conv(treatment);
        r.variants[0].users = control.1;
        r.variants[1].users = treatment.1;
        r
    }

    fn few_users_guarding(metric: &str) -> AnalysisSettings {
        AnalysisSettings {
            guardrail_metrics: vec![metric.to_owned()],
            minimum_users: 5,
            ..AnalysisSettings::default()
        }
    }

    #[test]
    fn a_treatment_that_never_converts_where_the_control_does_rolls_back() {
        // Issue 65: 0 purchases in 68 users against 317 in 634 read "no estimate" and the
        // rollout went on to 100%. Fisher's exact test: p = 1.04e-19 (SciPy).
        let r = zero_rate((317, 634), (0, 68));
        let d = decide(&r, &few_users_guarding(PRIMARY));
        assert_eq!(d.verdict, Verdict::RollBack, "{d:?}");
        assert_eq!(d.variant_id, Some(vid(2)));
        assert_eq!(d.reasons[0].code, "guardrail_worse");
        let words = &d.reasons[0].message;
        assert!(
            words.contains("no conversions (0 of 68 users)")
                && words.contains("317 of 634")
                && words.contains("Fisher's exact test p = 1.04e-19"),
            "{words}"
        );
        // As the primary metric alone (no guardrail), every treatment is worse: roll back.
        let d = decide(
            &r,
            &AnalysisSettings {
                minimum_users: 5,
                ..AnalysisSettings::default()
            },
        );
        assert_eq!(d.verdict, Verdict::RollBack, "{d:?}");
        assert_eq!(d.reasons[0].code, "primary_worse");
    }

    #[test]
    fn a_zero_rate_that_chance_explains_is_not_worse() {
        // 0 of 20 against 1 of 20: p = 1 (SciPy); no verdict from so little.
        let d = decide(&zero_rate((1, 20), (0, 20)), &few_users_guarding(PRIMARY));
        assert_eq!(d.verdict, Verdict::KeepRunning, "{d:?}");
        assert!(
            d.reasons.iter().all(|r| r.code != "guardrail_worse"),
            "{d:?}"
        );
    }

    #[test]
    fn intervals_people_read_are_clamped_at_minus_100_percent() {
        // Issue 65: "95% interval -102.3% to -67.9%" is no figure a conversion can have.
        let worse: Cmp = Some((-0.851, -1.023, -0.679, 0.0));
        let d = decide(
            &report(&["control", "trial"], 1000, &[(PRIMARY, &[worse])]),
            &guarded(),
        );
        let words = &d.reasons[0].message;
        assert!(words.contains("-100.0% to -67.9%"), "{words}");
        assert_eq!(relative_percent(-1.023), "-100.0%");
        assert_eq!(relative_percent(0.25), "25.0%");
    }

    #[test]
    fn a_sample_ratio_mismatch_gives_no_decision() {
        // A clear winner otherwise: the warning alone stops it.
        let mut r = report(&["control", "trial"], 1000, &[(PRIMARY, &[BETTER])]);
        r.warnings.push(Warning {
            code: "srm",
            message: "sample ratio mismatch: 600 / 400 (p = 1.0e-9)".to_owned(),
        });
        let d = decide(&r, &AnalysisSettings::default());
        assert_eq!(d.verdict, Verdict::NoDecision);
        assert_eq!(d.variant_id, None);
        assert_eq!(d.reasons.len(), 1);
        assert_eq!(d.reasons[0].code, "srm");
        assert!(d.reasons[0].message.contains("600 / 400"));
    }

    #[test]
    fn fewer_users_than_the_minimum_keeps_it_running() {
        let r = report(&["control", "trial"], 99, &[(PRIMARY, &[BETTER])]);
        let d = decide(&r, &AnalysisSettings::default());
        assert_eq!(d.verdict, Verdict::KeepRunning);
        assert_eq!(d.variant_id, None);
        assert_eq!(d.reasons.len(), 2);
        assert!(d.reasons.iter().all(|r| r.code == "minimum_users"));
        assert_eq!(d.reasons[1].variant_id, Some(vid(2)));
        assert_eq!(
            d.reasons[1].message,
            "trial has 99 users, fewer than the 100 each variant needs before a verdict"
        );
        // At the minimum, the same report ships.
        let r = report(&["control", "trial"], 100, &[(PRIMARY, &[BETTER])]);
        assert_eq!(
            decide(&r, &AnalysisSettings::default()).verdict,
            Verdict::Ship
        );
    }

    #[test]
    fn a_guardrail_significantly_worse_rolls_back_naming_it_and_the_variant() {
        // The primary metric is better: the guardrail wins.
        let r = report(
            &["control", "trial"],
            1000,
            &[("flow_complete", &[WORSE]), (PRIMARY, &[BETTER])],
        );
        let d = decide(&r, &guarded());
        assert_eq!(d.verdict, Verdict::RollBack);
        assert_eq!(d.variant_id, Some(vid(2)));
        assert_eq!(d.reasons[0].code, "guardrail_worse");
        assert_eq!(d.reasons[0].metric.as_deref(), Some("flow_complete"));
        assert_eq!(d.reasons[0].variant_id, Some(vid(2)));
        assert_eq!(
            d.reasons[0].message,
            "guardrail flow_complete: trial is 8.1% worse than control \
             (95% interval -14.0% to -2.2%)"
        );
        // Without the guardrail setting, the same report ships.
        assert_eq!(
            decide(&r, &AnalysisSettings::default()).verdict,
            Verdict::Ship
        );
    }

    #[test]
    fn every_treatment_primary_significantly_worse_rolls_back() {
        let r = report(&["control", "a", "b"], 1000, &[(PRIMARY, &[WORSE, WORSE])]);
        let d = decide(&r, &AnalysisSettings::default());
        assert_eq!(d.verdict, Verdict::RollBack);
        assert_eq!(d.variant_id, None);
        assert_eq!(d.reasons.len(), 2);
        assert!(d.reasons.iter().all(|r| r.code == "primary_worse"));
        assert_eq!(
            d.reasons[1].message,
            "purchase_complete: b is 8.1% worse than control (95% interval -14.0% to -2.2%)"
        );
        // Only one of two worse: keep running, saying which one is worse.
        let r = report(&["control", "a", "b"], 1000, &[(PRIMARY, &[WORSE, FLAT])]);
        let d = decide(&r, &AnalysisSettings::default());
        assert_eq!(d.verdict, Verdict::KeepRunning);
        assert_eq!(d.reasons[0].code, "primary_worse");
        assert_eq!(d.reasons[1].code, "no_significant_difference");
    }

    #[test]
    fn one_treatment_significantly_better_ships() {
        let r = report(
            &["control", "a", "trial"],
            1000,
            &[("flow_complete", &[FLAT, FLAT]), (PRIMARY, &[FLAT, BETTER])],
        );
        let d = decide(&r, &guarded());
        assert_eq!(d.verdict, Verdict::Ship);
        assert_eq!(d.variant_id, Some(vid(3)));
        assert_eq!(d.reasons.len(), 1);
        assert_eq!(d.reasons[0].code, "primary_better");
        assert_eq!(d.reasons[0].metric.as_deref(), Some(PRIMARY));
        assert_eq!(
            d.reasons[0].message,
            "purchase_complete: trial is 12.3% better than control \
             (95% interval 4.1% to 20.5%); chance to win 99.0%"
        );
    }

    #[test]
    fn of_several_better_treatments_the_highest_chance_to_win_ships() {
        let good = Some((0.08, 0.01, 0.15, 0.97));
        let r = report(
            &["control", "a", "b", "c"],
            1000,
            &[(PRIMARY, &[good, BETTER, good])],
        );
        let d = decide(&r, &AnalysisSettings::default());
        assert_eq!(d.verdict, Verdict::Ship);
        assert_eq!(d.variant_id, Some(vid(3)));
        let ids: Vec<_> = d.reasons.iter().map(|r| r.variant_id).collect();
        assert_eq!(ids, [Some(vid(3)), Some(vid(2)), Some(vid(4))]);
    }

    #[test]
    fn nothing_significant_keeps_it_running() {
        let r = report(&["control", "a", "b"], 1000, &[(PRIMARY, &[FLAT, None])]);
        let d = decide(&r, &AnalysisSettings::default());
        assert_eq!(d.verdict, Verdict::KeepRunning);
        assert_eq!(d.variant_id, None);
        assert_eq!(
            d.reasons[0].message,
            "purchase_complete: a differs from control by 1.2% (95% interval -3.0% to 5.4%), \
             not significantly"
        );
        assert_eq!(d.reasons[1].code, "no_significant_difference");
        assert!(d.reasons[1].message.contains("zero_variance"));
    }

    #[test]
    fn missing_metrics_are_named() {
        let r = report(&["control", "trial"], 1000, &[(PRIMARY, &[FLAT])]);
        let settings = AnalysisSettings {
            primary_metric: "signup".to_owned(),
            ..guarded()
        };
        let d = decide(&r, &settings);
        assert_eq!(d.verdict, Verdict::KeepRunning);
        let codes: Vec<_> = d.reasons.iter().map(|r| r.code).collect();
        assert_eq!(codes, ["metric_missing", "metric_missing"]);
        assert_eq!(d.reasons[1].metric.as_deref(), Some("signup"));
    }
}
