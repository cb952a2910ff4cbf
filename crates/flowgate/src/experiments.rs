//! `flowgate experiments list|results` (D22): the catalog's experiments, and which variant of
//! one wins, from the stored events. The report is made as the admin API makes it
//! (`flowgate_http::results`); this module prints it as a table, or as D22's JSON.

use flowgate_domain::text::rfc3339;
use std::fmt::Write as _;

use flowgate_control::results::{experiment_list, experiment_report, ReportError, ReportParams};
use flowgate_domain::ports::CatalogSource;
use flowgate_domain::results::{Estimate, ExperimentReport, Method, MetricKind, MetricVariant};
use flowgate_domain::Catalog;
use flowgate_http::results::{
    experiments_json, metrics_by_role, report_json, verdict_words, MetricRole,
};
use flowgate_store::Store;

use crate::cli::{ExitCode, ExperimentsCommand};
use crate::commands::print_json;
use crate::config::Config;
use crate::terminal::{errln, escape};

/// `flowgate experiments ...`
pub async fn experiments(store: &Store, config: &Config, command: ExperimentsCommand) -> ExitCode {
    let catalog = match store.load_catalog().await.map(Catalog::build) {
        Ok(Ok(catalog)) => catalog,
        Ok(Err(e)) => {
            errln!("flowgate: the stored catalog does not build: {e}");
            return ExitCode::Failure;
        }
        Err(e) => {
            errln!("flowgate: the catalog could not be read: {e}");
            return ExitCode::Failure;
        }
    };
    let reader = match crate::adapters::results_reader(config) {
        Ok(reader) => reader,
        Err(code) => return code,
    };
    match command {
        ExperimentsCommand::List { app, json } => {
            match experiment_list(&catalog, &reader, app.as_deref()).await {
                Ok((listed, exposed)) if json => {
                    print_json(&experiments_json(&listed, &exposed));
                    ExitCode::Success
                }
                Ok((listed, exposed)) => {
                    crate::terminal::lines(&list_table(&experiments_json(&listed, &exposed)));
                    ExitCode::Success
                }
                Err(e) => failure(&e),
            }
        }
        ExperimentsCommand::Results {
            experiment,
            from,
            to,
            metrics,
            method,
            horizon,
            json,
        } => {
            let metrics: Vec<&str> = metrics.iter().map(String::as_str).collect();
            let params = match ReportParams::parse(
                from.as_deref(),
                to.as_deref(),
                &metrics,
                method.as_deref(),
            )
            .and_then(|p| p.with_horizon(horizon.as_deref()))
            {
                Ok(params) => params,
                Err(e) => return failure(&e),
            };
            let settings = config.results_settings();
            let now = time::OffsetDateTime::now_utc();
            match experiment_report(&catalog, &reader, &experiment, &params, &settings, now).await {
                Ok(report) if json => {
                    print_json(&report_json(&report));
                    ExitCode::Success
                }
                Ok(report) => {
                    crate::terminal::lines(&report_table(&report));
                    ExitCode::Success
                }
                Err(e) => failure(&e),
            }
        }
    }
}

/// The message and exit code of a failed list or report: the caller's mistake is 4 (D22),
/// the store's failure 1.
fn failure(e: &ReportError) -> ExitCode {
    errln!("flowgate: {e}");
    match e {
        ReportError::Store(_) => {
            if e.timed_out() {
                errln!(
                    "flowgate: ask for a shorter window (--from, --to), or raise \
                     experiments.query_timeout_ms"
                );
            }
            ExitCode::Failure
        }
        _ => ExitCode::InvalidInput,
    }
}

/// Columns padded to their widest cell, two spaces apart; each cell escaped (a name from the
/// catalog cannot start a line or move the cursor), then measured.
fn table(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| escape(cell).into_owned()).collect())
        .collect();
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The list as a table, from its JSON.
fn list_table(list: &serde_json::Value) -> String {
    let empty = Vec::new();
    let items = list["experiments"].as_array().unwrap_or(&empty);
    if items.is_empty() {
        return "no experiments in the catalog\n".to_owned();
    }
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let mut rows = vec![[
        "experiment_id",
        "name",
        "app",
        "placement",
        "status",
        "variants",
        "exposed users",
    ]
    .map(str::to_owned)
    .to_vec()];
    for x in items {
        let variants: Vec<String> = x["variants"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .map(|v| text(&v["name"]))
            .collect();
        rows.push(vec![
            text(&x["experiment_id"]),
            text(&x["name"]),
            text(&x["app_name"]),
            text(&x["placement_key"]),
            status_with_schedule(x),
            variants.join(", "),
            x["exposed_users"].as_u64().unwrap_or(0).to_string(),
        ]);
    }
    table(&rows)
}

/// The status, with the schedule still ahead (D29): `draft (starts 2026-12-01T09:00:00Z)`,
/// `running (ends ...)`.
fn status_with_schedule(x: &serde_json::Value) -> String {
    let status = x["status"].as_str().unwrap_or_default().to_owned();
    let mut ahead = Vec::new();
    if let (Some(at), "draft") = (x["starts_at"].as_str(), status.as_str()) {
        ahead.push(format!("starts {at}"));
    }
    if let (Some(at), false) = (x["ends_at"].as_str(), status == "concluded") {
        ahead.push(format!("ends {at}"));
    }
    if ahead.is_empty() {
        status
    } else {
        format!("{status} ({})", ahead.join(", "))
    }
}

fn percent(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn signed_percent(x: f64) -> String {
    format!("{:+.1}%", 100.0 * x)
}

/// A relative figure (a lift or an interval's end) as people read it: clamped at -100%, below
/// which no non-negative metric can fall (D35; `--json` keeps gbstats' figures).
fn signed_relative(x: f64) -> String {
    signed_percent(x.max(-1.0))
}

fn p_value(p: f64) -> String {
    if p < 0.0001 {
        "<0.0001".to_owned()
    } else {
        format!("{p:.4}")
    }
}

/// One metric row's comparison cells: lift, 95% CI, p-value, chance to win (empty for the
/// control; the reason code where there is no estimate).
fn comparison(v: &MetricVariant) -> Vec<String> {
    match &v.comparison {
        None => vec![String::new(); 4],
        Some(Ok(Estimate {
            lift,
            ci_low,
            ci_high,
            p_value: p,
            chance_to_win,
            ..
        })) => vec![
            signed_relative(*lift),
            format!(
                "[{}, {}]",
                signed_relative(*ci_low),
                signed_relative(*ci_high)
            ),
            p_value(*p),
            format!("{:.1}%", 100.0 * chance_to_win),
        ],
        Some(Err(no)) => vec![
            format!("none ({})", no.code()),
            String::new(),
            String::new(),
            String::new(),
        ],
    }
}

/// The report as text: the verdict and its reasons (D27), the header, the variants, a table of
/// metrics (the primary first, then the guardrails, each marked), the warnings.
fn report_table(r: &ExperimentReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Verdict: {}", verdict_words(r));
    for reason in &r.decision.reasons {
        let _ = writeln!(out, "  - {}", escape(&reason.message));
    }
    let _ = writeln!(
        out,
        "{} intervals and p-values{}; minimum {} users per variant before a verdict",
        match r.method {
            Method::FixedHorizon => "fixed-horizon",
            _ => "sequential",
        },
        match r.method {
            Method::FixedHorizon => " (valid for one look at a horizon set in advance)",
            _ => " (valid however often the report is read)",
        },
        r.analysis.minimum_users
    );
    out.push('\n');
    let _ = writeln!(
        out,
        "{} ({}), {}, app {}",
        escape(&r.name),
        r.experiment_id,
        r.status.as_str(),
        r.app_id
    );
    let _ = writeln!(
        out,
        "window {} .. {} (users first exposed in it, their events up to its end); revenue in {}",
        rfc3339(r.from),
        rfc3339(r.to),
        r.currency
    );
    let _ = writeln!(
        out,
        "exposed users {}, left out for seeing several variants {}, purchases without a rate {}, \
         sample ratio p-value {}",
        r.exposed_users,
        r.multiple_exposures,
        r.unconverted_purchases,
        p_value(r.srm_p_value)
    );
    out.push('\n');
    let mut rows = vec![["variant", "weight", "users"].map(str::to_owned).to_vec()];
    for v in &r.variants {
        rows.push(vec![
            v.name.clone(),
            format!("{:.0}%", 100.0 * v.weight),
            v.users.to_string(),
        ]);
    }
    out.push_str(&table(&rows));
    out.push('\n');
    let name_of = |id| {
        r.variants
            .iter()
            .find(|v| v.variant_id == id)
            .map_or_else(|| id.to_string(), |v| v.name.clone())
    };
    let mut rows = vec![[
        "metric",
        "variant",
        "users",
        "value",
        "lift",
        "95% CI",
        "p-value",
        "chance to win",
    ]
    .map(str::to_owned)
    .to_vec()];
    for (m, role) in metrics_by_role(r) {
        for (i, v) in m.variants.iter().enumerate() {
            let mark = match role {
                MetricRole::Primary => " [primary]",
                MetricRole::Guardrail => " [guardrail]",
                MetricRole::Other => "",
            };
            let metric = match (i, m.kind) {
                (0, MetricKind::Mean) => format!("{} ({}/user){mark}", m.metric, r.currency),
                (0, _) => format!("{}{mark}", m.metric),
                _ => String::new(),
            };
            let value = match (v.sums.computable(m.kind), m.kind) {
                (Err(no), _) => format!("none ({})", no.code()),
                (Ok(()), MetricKind::Mean) => format!("{:.2}", v.mean),
                (Ok(()), _) => percent(v.mean),
            };
            let mut row = vec![
                metric,
                name_of(v.variant_id),
                v.sums.users.to_string(),
                value,
            ];
            row.extend(comparison(v));
            rows.push(row);
        }
    }
    out.push_str(&table(&rows));
    if !r.warnings.is_empty() {
        out.push('\n');
        for w in &r.warnings {
            let _ = writeln!(out, "warning ({}): {}", w.code, escape(&w.message));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::signed_relative;

    #[test]
    fn relative_figures_are_clamped_at_minus_100_percent() {
        // Issue 65: a guardrail read "95% interval -102.3% to -67.9%".
        assert_eq!(signed_relative(-1.023), "-100.0%");
        assert_eq!(signed_relative(-0.679), "-67.9%");
        assert_eq!(signed_relative(0.25), "+25.0%");
    }
}
