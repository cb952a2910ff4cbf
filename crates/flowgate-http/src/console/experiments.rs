//! The experiments and each one's results (D22, D27), read through the admin API's results
//! access and drawn by `charts.rs`.

use super::session::Session;
use super::{changes, error_page, html, pages, query_fields, signed_in, Data};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use flowgate_control::results::{experiment_list, ReportError, ReportParams};
use flowgate_domain::people::Role;

/// `GET /console/experiments`
pub(super) async fn experiments(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let access = &console.results;
    let catalog = access.catalog.load();
    let started = std::time::Instant::now();
    let listed = experiment_list(&catalog, access.source.as_ref(), None).await;
    access.metrics.observe(started.elapsed(), &listed);
    match listed {
        Ok((listed, exposed)) => html(
            StatusCode::OK,
            pages::experiments(&session, &listed, &exposed),
        ),
        Err(e) => report_failure(&session, &e),
    }
}

/// A results read that failed, as a page.
fn report_failure(session: &Session, error: &ReportError) -> HttpResponse {
    match error {
        ReportError::UnknownExperiment(_) | ReportError::UnknownApp(_) => error_page(
            session,
            StatusCode::NOT_FOUND,
            "Not found",
            &error.to_string(),
        ),
        ReportError::InvalidParam { .. } => error_page(
            session,
            StatusCode::BAD_REQUEST,
            "Invalid request",
            &error.to_string(),
        ),
        ReportError::Store(cause) => {
            tracing::error!(error = %cause, "console: results read failed");
            let message = if error.timed_out() {
                "The results were not read within experiments.query_timeout_ms; ask for a \
                 shorter window, or raise the limit."
            } else {
                "The results store could not be read; retry later (the cause is in the log)."
            };
            error_page(
                session,
                StatusCode::SERVICE_UNAVAILABLE,
                "Results unavailable",
                message,
            )
        }
    }
}

/// `GET /console/experiments/{id}[?from=&to=&method=]`: one experiment's results with charts.
pub(super) async fn experiment(
    req: HttpRequest,
    path: web::Path<String>,
    console: Data,
) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let fields = query_fields(&req);
    let non_empty = |name| fields.get(name).filter(|v| !v.is_empty());
    let (from, to) = (non_empty("from"), non_empty("to"));
    let report = match ReportParams::parse(from, to, &[], non_empty("method")) {
        Ok(params) => console.results.report(&path, &params).await,
        Err(e) => Err(e),
    };
    // The change forms need the catalog as stored; without it the page shows no forms.
    let forms = match (&report, session.role.allows(Role::Editor)) {
        (Ok(report), true) => match console.backend.catalog().await {
            Ok(data) => {
                let verdict = data
                    .experiments()
                    .find(|e| e.id == report.experiment_id)
                    .and_then(|e| {
                        changes::VerdictAction::of(
                            report.decision.verdict,
                            report.decision.variant_id,
                            crate::results::verdict_words(report),
                            e,
                        )
                    });
                changes::experiment_forms(&session, &data, report.experiment_id, verdict.as_ref())
            }
            Err(e) => {
                tracing::warn!(error = %e, "console: the catalog could not be read for the change forms");
                (maud::html! {}, maud::html! {})
            }
        },
        _ => (maud::html! {}, maud::html! {}),
    };
    match report {
        Ok(report) => html(
            StatusCode::OK,
            pages::experiment(
                &session,
                &report,
                from.unwrap_or_default(),
                to.unwrap_or_default(),
                forms,
            ),
        ),
        Err(e) => report_failure(&session, &e),
    }
}
