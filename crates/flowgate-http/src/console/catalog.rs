//! The catalog as stored, explain (D18), the change preview of a catalog file (a dry run off
//! the worker) and the import history.

use super::{
    checked_post, error_page, html, pages, posted, signed_in, store_failure, Data, PostedForm,
    HISTORY_LIMIT, UPLOAD_LIMIT,
};
use actix_multipart::Multipart;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use flowgate_control::console::PreviewError;
use flowgate_domain::people::Role;
use flowgate_domain::ports::StoreError;
use futures_util::StreamExt as _;

/// `GET /console/catalog`
pub(super) async fn catalog(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    match console.backend.catalog().await {
        Ok(data) => html(StatusCode::OK, pages::catalog(&session, &data)),
        Err(e) => store_failure(&session, "The catalog could not be read", &e),
    }
}

/// `GET /console/explain`: the form.
pub(super) async fn explain_form(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let catalog = console.explain.catalog.load();
    html(
        StatusCode::OK,
        pages::explain(&session, &catalog, &pages::ExplainInput::default(), None),
    )
}

/// `POST /console/explain`: the D18 trace of a request.
pub(super) async fn explain_run(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Viewer).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let input = pages::ExplainInput {
        app: fields.get("app").unwrap_or_default().to_owned(),
        placement: fields.get("placement").unwrap_or_default().to_owned(),
        body: fields.get("body").unwrap_or_default().to_owned(),
    };
    let access = &console.explain;
    let catalog = access.catalog.load_full();
    if input.body.len() > access.body_limit {
        let message = format!(
            "The body is {} bytes; resolve takes at most {}.",
            input.body.len(),
            access.body_limit
        );
        let outcome = Err((StatusCode::PAYLOAD_TOO_LARGE, message));
        return html(
            StatusCode::PAYLOAD_TOO_LARGE,
            pages::explain(&session, &catalog, &input, Some(&outcome)),
        );
    }
    let explained = crate::explain::explain(
        &catalog,
        &input.app,
        &input.placement,
        input.body.as_bytes(),
        access.default_ttl,
        access.sticky.as_deref(),
    )
    .await;
    let (status, outcome) = match explained {
        Ok(explained) => (StatusCode::OK, Ok(explained)),
        Err(e) => {
            let mut message = e.detail.clone();
            for error in &e.errors {
                message.push_str(&format!("; {}: {}", error.field, error.message));
            }
            (e.status, Err((e.status, message)))
        }
    };
    html(
        status,
        pages::explain(&session, &catalog, &input, Some(&outcome)),
    )
}

/// `GET /console/preview`: the upload form.
pub(super) async fn preview_form(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    html(StatusCode::OK, pages::preview(&session, None))
}

/// An upload's fields: the CSRF token and the file (name, text).
struct Upload {
    csrf: Option<String>,
    file: Option<(String, Vec<u8>)>,
}

/// Why an upload was not read.
enum UploadError {
    TooLarge,
    Malformed(String),
}

/// Reads a `multipart/form-data` body of at most [`UPLOAD_LIMIT`] bytes of fields.
async fn read_upload(mut multipart: Multipart) -> Result<Upload, UploadError> {
    let mut upload = Upload {
        csrf: None,
        file: None,
    };
    let mut total = 0usize;
    while let Some(field) = multipart.next().await {
        let mut field = field.map_err(|e| UploadError::Malformed(e.to_string()))?;
        let name = field.name().unwrap_or_default().to_owned();
        let file_name = field
            .content_disposition()
            .and_then(|d| d.get_filename())
            .map(str::to_owned);
        let mut bytes = Vec::new();
        while let Some(chunk) = field.next().await {
            let chunk = chunk.map_err(|e| UploadError::Malformed(e.to_string()))?;
            total += chunk.len();
            if total > UPLOAD_LIMIT {
                return Err(UploadError::TooLarge);
            }
            bytes.extend_from_slice(&chunk);
        }
        match name.as_str() {
            "csrf" => upload.csrf = Some(String::from_utf8_lossy(&bytes).into_owned()),
            "file" => upload.file = Some((file_name.unwrap_or_default(), bytes)),
            _ => {}
        }
    }
    Ok(upload)
}

/// `POST /console/preview`: the D19 dry run of an uploaded file; nothing is written.
pub(super) async fn preview_run(
    req: HttpRequest,
    multipart: Multipart,
    console: Data,
) -> HttpResponse {
    let signed_in = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let upload = match read_upload(multipart).await {
        Ok(upload) => upload,
        Err(UploadError::TooLarge) => {
            let message = format!("The file is larger than {UPLOAD_LIMIT} bytes.");
            return error_page(
                &signed_in,
                StatusCode::PAYLOAD_TOO_LARGE,
                "File too large",
                &message,
            );
        }
        Err(UploadError::Malformed(e)) => {
            let message = format!("The upload could not be read: {e}");
            return error_page(
                &signed_in,
                StatusCode::BAD_REQUEST,
                "Upload refused",
                &message,
            );
        }
    };
    let session = match checked_post(&console, &req, upload.csrf.as_deref(), Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let Some((name, bytes)) = upload.file.filter(|(_, bytes)| !bytes.is_empty()) else {
        let outcome = Err(PreviewError::Invalid(vec![
            "choose a catalog file to preview".to_owned(),
        ]));
        return html(
            StatusCode::BAD_REQUEST,
            pages::preview(&session, Some((&String::new(), &outcome))),
        );
    };
    let name = if name.is_empty() {
        "upload.json".to_owned()
    } else {
        name
    };
    let outcome = match String::from_utf8(bytes) {
        Ok(text) => {
            // Parsed, validated and diffed off the admin listener's worker, one preview at a
            // time: the turn goes with the work, so a client that leaves does not end it early
            // (the work runs on), and the memory of previews is that of one.
            let turn = console.background.preview_permit().await;
            let (backend, file) = (console.backend.clone(), name.clone());
            console
                .background
                .run(async move {
                    let _turn = turn;
                    backend.preview(&file, &text).await
                })
                .await
                .unwrap_or_else(|| {
                    Err(PreviewError::Store(StoreError::Other {
                        detail: "the preview did not finish (see the log)".to_owned(),
                    }))
                })
        }
        Err(_) => Err(PreviewError::Invalid(vec![format!(
            "{name:?} is not UTF-8 text"
        )])),
    };
    let status = match &outcome {
        Ok(_) => StatusCode::OK,
        Err(PreviewError::Invalid(_)) => StatusCode::UNPROCESSABLE_ENTITY,
        Err(PreviewError::Store(e)) => {
            tracing::error!(error = %e, "console: preview failed");
            StatusCode::SERVICE_UNAVAILABLE
        }
    };
    html(status, pages::preview(&session, Some((&name, &outcome))))
}

/// `GET /console/history`: the applied imports.
pub(super) async fn history(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    match console.backend.import_history(HISTORY_LIMIT).await {
        Ok(entries) => html(StatusCode::OK, pages::history(&session, &entries)),
        Err(e) => store_failure(&session, "The import history could not be read", &e),
    }
}
