//! The store's side of the operator console (D24, D28): [`ConsoleBackend`] on the store, with
//! the functions `flowgate catalog history`, `flowgate import --dry-run` and `flowgate keys`
//! call, catalog changes through the import's one write path, and staged rollouts (D29)
//! through the engine `flowgate rollouts` uses ([`crate::rollouts`]).

use std::path::Path;

use flowgate_control::changes::{apply_change, preview_change, ChangeFailure};
use flowgate_control::import::FileFormat;
use flowgate_control::import::{dry_run_text, DryRunReport, ImportError};
use flowgate_domain::catalog::{CatalogChange, CatalogData};
use flowgate_domain::ids::{ChangeId, KeyId, RolloutId, WorkspaceId};
use flowgate_domain::keys::{KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::people::ChangeDecision;
use flowgate_domain::ports::{BoxFuture, CatalogSource, KeyStore, RolloutStore, StoreError};
use flowgate_domain::rollouts::Rollout;
use flowgate_http::console::{
    ChangeOutcome, ChangeRefusal, ConsoleBackend, ImportEntry, NewKey, Preview, PreviewError,
    RolloutMove, RolloutStart,
};
use flowgate_store::Store;
use time::OffsetDateTime;

use flowgate_control::rollouts::{RolloutFailure, StartRequest};

/// The console's backend: the store.
pub struct StoreConsole(pub Store);

impl ConsoleBackend for StoreConsole {
    fn preview_change(
        &self,
        change: CatalogChange,
    ) -> BoxFuture<'_, Result<ChangeOutcome, ChangeRefusal>> {
        Box::pin(async move {
            let previewed = preview_change(&self.0, &change, OffsetDateTime::now_utc())
                .await
                .map_err(refusal)?;
            Ok(ChangeOutcome {
                revision_before: previewed.revision,
                revision: previewed.revision,
                diff: previewed.diff,
                description: previewed.description,
            })
        })
    }

    fn apply_change(
        &self,
        change: CatalogChange,
        base: u64,
        actor: String,
        comment: String,
        decision: Option<(ChangeId, ChangeDecision)>,
    ) -> BoxFuture<'_, Result<ChangeOutcome, ChangeRefusal>> {
        Box::pin(async move {
            let now = OffsetDateTime::now_utc();
            // An approved rollout start (D35) starts the rollout with its record.
            let applied = match (&change, decision) {
                (CatalogChange::StartRollout { plan: Some(_), .. }, Some(decision)) => {
                    flowgate_control::review::rollout::start_reviewed(
                        &self.0, &change, base, &actor, &comment, decision, now,
                    )
                    .await
                    .map_err(rollout_refusal)?
                }
                (_, decision) => {
                    apply_change(&self.0, &change, base, &actor, &comment, decision, now)
                        .await
                        .map_err(refusal)?
                }
            };
            Ok(ChangeOutcome {
                revision_before: applied.revision_before,
                revision: applied.revision,
                diff: applied.diff,
                description: applied.description,
            })
        })
    }

    fn catalog(&self) -> BoxFuture<'_, Result<CatalogData, StoreError>> {
        self.0.load_catalog()
    }

    fn import_history(&self, limit: usize) -> BoxFuture<'_, Result<Vec<ImportEntry>, StoreError>> {
        Box::pin(async move {
            let records = self.0.catalog_history(limit).await?;
            Ok(records
                .into_iter()
                .map(|r| ImportEntry {
                    revision: r.revision,
                    imported_at: r.imported_at,
                    sha256: r.sha256,
                    file: r.file,
                    summary: r.summary,
                })
                .collect())
        })
    }

    fn preview<'a>(
        &'a self,
        file_name: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<Preview, PreviewError>> {
        Box::pin(async move {
            let path = Path::new(file_name);
            let now = OffsetDateTime::now_utc();
            match dry_run_text(&self.0, path, FileFormat::of(path), text, now).await {
                Ok(DryRunReport { report, diff }) => Ok(Preview {
                    revision: report.revision,
                    changed: report.changed,
                    summary: flowgate_domain::catalog::ImportSummary {
                        workspaces: report.workspaces,
                        apps: report.apps,
                        flows: report.flows,
                        versions: report.versions,
                        placements: report.placements,
                        keys: report.keys,
                    },
                    warnings: report.warnings.iter().map(ToString::to_string).collect(),
                    diff,
                }),
                Err(ImportError::Invalid(problems)) => Err(PreviewError::Invalid(
                    problems.iter().map(ToString::to_string).collect(),
                )),
                Err(ImportError::Store(e)) => Err(PreviewError::Store(e)),
                Err(other) => Err(PreviewError::Invalid(vec![other.to_string()])),
            }
        })
    }

    fn list_keys(
        &self,
        workspace: WorkspaceId,
    ) -> BoxFuture<'_, Result<Vec<KeyRecord>, StoreError>> {
        self.0.list_keys(workspace)
    }

    fn create_key(
        &self,
        workspace: WorkspaceId,
        environment: KeyEnvironment,
        key_type: KeyType,
        name: String,
    ) -> BoxFuture<'_, Result<NewKey, StoreError>> {
        Box::pin(async move {
            let created = self
                .0
                .create_key(
                    workspace,
                    environment,
                    key_type,
                    name,
                    OffsetDateTime::now_utc(),
                )
                .await?;
            Ok(NewKey {
                key: created.key,
                record: created.record,
            })
        })
    }

    fn revoke_key(&self, id: KeyId) -> BoxFuture<'_, Result<KeyRecord, StoreError>> {
        self.0.revoke_key(id, OffsetDateTime::now_utc())
    }

    fn list_rollouts(&self) -> BoxFuture<'_, Result<Vec<Rollout>, StoreError>> {
        self.0.list_rollouts(None)
    }

    fn rollout(&self, id: RolloutId) -> BoxFuture<'_, Result<Option<Rollout>, StoreError>> {
        RolloutStore::rollout(&self.0, id)
    }

    fn start_rollout(
        &self,
        start: RolloutStart,
        actor: String,
        comment: String,
    ) -> BoxFuture<'_, Result<Rollout, ChangeRefusal>> {
        Box::pin(async move {
            let request = request_of(start, actor, comment);
            flowgate_control::rollouts::start(&self.0, request, OffsetDateTime::now_utc())
                .await
                .map_err(rollout_refusal)
        })
    }

    fn propose_rollout(
        &self,
        start: RolloutStart,
        actor: String,
        comment: String,
    ) -> BoxFuture<'_, Result<ChangeId, ChangeRefusal>> {
        Box::pin(async move {
            let request = request_of(start, actor, comment);
            flowgate_control::review::rollout::propose_start(
                &self.0,
                request,
                OffsetDateTime::now_utc(),
            )
            .await
            .map(|record| record.id)
            .map_err(rollout_refusal)
        })
    }

    fn move_rollout(
        &self,
        id: RolloutId,
        how: RolloutMove,
        actor: String,
        comment: String,
    ) -> BoxFuture<'_, Result<Rollout, ChangeRefusal>> {
        Box::pin(async move {
            let now = OffsetDateTime::now_utc();
            let store = &self.0;
            let moved = match how {
                RolloutMove::Pause => {
                    flowgate_control::rollouts::pause(store, id, &actor, &comment, now).await
                }
                RolloutMove::Resume => {
                    flowgate_control::rollouts::resume(store, id, &actor, &comment, now).await
                }
                // A person's rollback records no guardrail reading, as `flowgate rollouts
                // rollback`.
                RolloutMove::RollBack => {
                    let figures = serde_json::Value::Null;
                    flowgate_control::rollouts::roll_back(store, id, &actor, &comment, figures, now)
                        .await
                }
            };
            moved.map_err(rollout_refusal)
        })
    }
}

/// The console's rollout start as the rollouts' request, by `actor` with `comment`.
fn request_of(start: RolloutStart, actor: String, comment: String) -> StartRequest {
    StartRequest {
        app: start.app,
        placement: start.placement,
        flow: start.flow,
        version: start.version,
        plan: start.plan,
        actor,
        comment,
    }
}

/// A rollout's failure as the console shows it: the store's failures are unavailable (503)
/// and logged; the rest are the caller's (a wrong state, an invalid start).
fn rollout_refusal(failure: RolloutFailure) -> ChangeRefusal {
    let unavailable = !failure.is_callers();
    if unavailable {
        tracing::error!(error = %failure, "console: a rollout could not be read or written");
    }
    ChangeRefusal {
        code: failure.code().to_owned(),
        message: failure.to_string(),
        unavailable,
    }
}

/// A change's failure as the console shows it.
fn refusal(failure: ChangeFailure) -> ChangeRefusal {
    if let ChangeFailure::Store(e) = &failure {
        tracing::error!(error = %e, "console: a catalog change could not be read or written");
    }
    ChangeRefusal {
        code: failure.code().to_owned(),
        message: failure.to_string(),
        unavailable: matches!(failure, ChangeFailure::Store(_)),
    }
}

/// `[console.oidc]` as the console takes it; `None` while `issuer` is empty. The rules were
/// validated with the configuration (each names one match and a known role).
pub fn oidc_access(
    config: &crate::config::OidcConfig,
) -> Option<flowgate_http::console::OidcAccess> {
    use flowgate_http::console::{OidcAccess, RoleMatch, RoleRule};
    if config.issuer.trim().is_empty() {
        return None;
    }
    let roles = config
        .roles
        .iter()
        .filter_map(|rule| {
            let matches = match (&rule.email_domain, &rule.group) {
                (Some(domain), None) => RoleMatch::EmailDomain(domain.trim().to_owned()),
                (None, Some(group)) => RoleMatch::Group(group.clone()),
                _ => return None,
            };
            Some(RoleRule {
                matches,
                role: rule.role.parse().ok()?,
            })
        })
        .collect();
    let mut settings = flowgate_http::oidc::OidcSettings::new(
        config.issuer.trim(),
        config.client_id.trim(),
        config.client_secret.clone(),
        config.redirect_url.trim(),
    );
    settings.scopes = config.scopes.clone();
    settings.groups_claim = config.groups_claim.clone();
    settings.ca_file = (!config.ca_file.is_empty()).then(|| config.ca_file.clone().into());
    Some(OidcAccess { settings, roles })
}
