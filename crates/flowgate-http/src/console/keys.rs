//! SDK keys: listed per workspace, created (shown once, sealed to the next page) and revoked.

use super::{
    audit_entry, error_page, html, pages, posted, query_fields, record, see_other, session,
    signed_in, store_failure, Console, Data, PostedForm,
};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use flowgate_control::keys::CreatedKey;
use flowgate_domain::ids::{KeyId, WorkspaceId};
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::people::{AuditAction, Role};
use std::time::Duration;

/// The workspace a keys request names, or the catalog's first.
fn workspace_param(console: &Console, given: Option<&str>) -> Result<Option<WorkspaceId>, String> {
    match given.filter(|w| !w.is_empty()) {
        Some(given) => given
            .parse::<uuid::Uuid>()
            .map(|id| Some(WorkspaceId::from_uuid(id)))
            .map_err(|_| format!("{given:?} is not a workspace id")),
        None => Ok(console
            .explain
            .catalog
            .load()
            .workspaces()
            .next()
            .map(|w| w.id())),
    }
}

/// `GET /console/keys[?workspace=]`: a workspace's keys and the form to create one.
pub(super) async fn keys(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let query = query_fields(&req);
    let workspace = match workspace_param(&console, query.get("workspace")) {
        Ok(workspace) => workspace,
        Err(message) => {
            return error_page(
                &session,
                StatusCode::BAD_REQUEST,
                "Invalid request",
                &message,
            )
        }
    };
    let catalog = console.explain.catalog.load();
    let records = match workspace {
        Some(id) => match console.backend.list_keys(id).await {
            Ok(records) => records,
            Err(e) => return store_failure(&session, "The keys could not be listed", &e),
        },
        None => Vec::new(),
    };
    html(
        StatusCode::OK,
        pages::keys(&session, &catalog, workspace, &records),
    )
}

/// `POST /console/keys`: creates a key, and redirects (303) to the page that shows it once.
pub(super) async fn create_key(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Editor).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let invalid = |message: String| {
        error_page(
            &session,
            StatusCode::BAD_REQUEST,
            "Key not created",
            &message,
        )
    };
    let workspace = match workspace_param(&console, fields.get("workspace")) {
        Ok(Some(workspace)) => workspace,
        Ok(None) => return invalid("choose a workspace".to_owned()),
        Err(message) => return invalid(message),
    };
    let environment = match fields.get("environment") {
        Some("live") => KeyEnvironment::Live,
        Some("test") => KeyEnvironment::Test,
        other => {
            return invalid(format!(
                "the environment is live or test, not {:?}",
                other.unwrap_or_default()
            ))
        }
    };
    let key_type = match fields.get("type") {
        Some("sdk") => KeyType::Sdk,
        Some("webhook") => KeyType::Webhook,
        Some("secret") => KeyType::Secret,
        other => {
            return invalid(format!(
                "the type is sdk, webhook or secret, not {:?}",
                other.unwrap_or_default()
            ))
        }
    };
    let name = match super::forms::key_name(fields.get("name").unwrap_or_default()) {
        Ok(name) if name.is_empty() => format!("{key_type} key"),
        Ok(name) => name,
        Err(message) => return invalid(message),
    };
    match console
        .backend
        .create_key(workspace, environment, key_type, name)
        .await
    {
        Ok(created) => {
            tracing::info!(key = %created.record.id, workspace = %workspace, "console: key created");
            let mut entry = audit_entry(
                &session.actor,
                AuditAction::KeyCreate,
                Some(created.record.id.to_string()),
            );
            entry.detail = serde_json::json!({
                "workspace_id": workspace.to_string(), "type": key_type.to_string(),
                "environment": environment.to_string(), "name": created.record.name,
            });
            record(&console, entry).await;
            // Post/Redirect/Get: reloading the page that shows the key creates no other. The
            // key travels to that page sealed in a cookie bound to this session, so whichever
            // replica serves the page shows it, once.
            let sealed = match console.sessions.sign_in_tokens().await {
                Ok(tokens) => {
                    let plain = serde_json::json!({
                        "key": created.key.expose(), "record": created.record,
                    });
                    session::seal(
                        tokens,
                        NEW_KEY_PURPOSE,
                        session.id_hash.as_bytes(),
                        plain.to_string().as_bytes(),
                    )
                    .ok()
                }
                Err(_) => None,
            };
            match sealed {
                Some(sealed) => {
                    let mut response = see_other(session::NEW_KEY_PATH);
                    let cookie = session::new_key_cookie(&req, sealed, NEW_KEY_LIFETIME);
                    let _ = response.add_cookie(&cookie);
                    response
                }
                // Shown here, then: a reload of this answer asks before posting again.
                None => html(StatusCode::OK, pages::key_created(&session, &created)),
            }
        }
        Err(e) => store_failure(&session, "The key was not created", &e),
    }
}

/// What a created key's cookie is sealed for.
const NEW_KEY_PURPOSE: &[u8] = b"flowgate console new key v1";
/// How long a created key's cookie lasts (the redirect follows at once).
const NEW_KEY_LIFETIME: Duration = Duration::from_secs(120);

/// `GET /console/keys/created`: the key the session just created, shown this once; after
/// that (a reload), the keys.
pub(super) async fn key_created(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Editor).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let created = match (
        req.cookie(session::NEW_KEY_COOKIE),
        console.sessions.sign_in_tokens().await,
    ) {
        (Some(cookie), Ok(tokens)) => session::open(
            tokens,
            NEW_KEY_PURPOSE,
            session.id_hash.as_bytes(),
            cookie.value(),
        )
        .and_then(|plain| serde_json::from_slice::<serde_json::Value>(&plain).ok())
        .and_then(|plain| {
            Some(CreatedKey {
                key: ApiKey::parse(plain["key"].as_str()?).ok()?,
                record: serde_json::from_value(plain["record"].clone()).ok()?,
            })
        }),
        _ => None,
    };
    let mut response = match created {
        Some(created) => html(StatusCode::OK, pages::key_created(&session, &created)),
        None => see_other("/console/keys"),
    };
    let removal = session::new_key_cookie(&req, String::new(), Duration::ZERO);
    let _ = response.add_cookie(&removal);
    response
}

/// The key of a revoke request's path and query, with its record.
async fn revoked_key(
    console: &Console,
    req: &HttpRequest,
    id: &str,
) -> Result<KeyRecord, (StatusCode, String)> {
    let id = id
        .parse::<uuid::Uuid>()
        .map(KeyId::from_uuid)
        .map_err(|_| (StatusCode::NOT_FOUND, format!("{id:?} is not a key id")))?;
    let query = query_fields(req);
    let workspace = workspace_param(console, query.get("workspace"))
        .map_err(|m| (StatusCode::BAD_REQUEST, m))?
        .ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                "the catalog has no workspace".to_owned(),
            )
        })?;
    let records = console
        .backend
        .list_keys(workspace)
        .await
        .map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    records.into_iter().find(|r| r.id == id).ok_or_else(|| {
        (
            StatusCode::NOT_FOUND,
            format!("workspace {workspace} has no key {id}"),
        )
    })
}

/// `GET /console/keys/{id}/revoke?workspace=`: the confirmation.
pub(super) async fn revoke_confirm(
    req: HttpRequest,
    path: web::Path<String>,
    console: Data,
) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Editor).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    match revoked_key(&console, &req, &path).await {
        Ok(record) => html(StatusCode::OK, pages::revoke_confirm(&session, &record)),
        Err((status, message)) => error_page(&session, status, "Key not found", &message),
    }
}

/// `POST /console/keys/{id}/revoke?workspace=`: revokes the key.
pub(super) async fn revoke(
    req: HttpRequest,
    path: web::Path<String>,
    form: PostedForm,
    console: Data,
) -> HttpResponse {
    let (_, session) = match posted(&console, &req, form, Role::Editor).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let record = match revoked_key(&console, &req, &path).await {
        Ok(record) => record,
        Err((status, message)) => return error_page(&session, status, "Key not found", &message),
    };
    match console.backend.revoke_key(record.id).await {
        Ok(record) => {
            tracing::info!(key = %record.id, "console: key revoked");
            let mut entry = audit_entry(
                &session.actor,
                AuditAction::KeyRevoke,
                Some(record.id.to_string()),
            );
            entry.detail = serde_json::json!({"workspace_id": record.workspace_id.to_string()});
            self::record(&console, entry).await;
            see_other(&format!("/console/keys?workspace={}", record.workspace_id))
        }
        Err(e) => store_failure(&session, "The key was not revoked", &e),
    }
}
