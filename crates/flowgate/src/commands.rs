//! The commands other than `serve`: migrate, import, keys, demo. Human output goes to stdout,
//! logs to stderr; `--json` prints one JSON document for scripts.

use flowgate_domain::ids::{KeyId, WorkspaceId};
use flowgate_domain::keys::KeyRecord;
use flowgate_domain::ports::{KeyStore, StoreError};
use flowgate_store::{import_file, ImportError, Store};
use serde_json::json;
use time::OffsetDateTime;

use crate::cli::{ExitCode, KeysCommand};
use crate::config::Config;
use crate::{demo, serve};

fn store_failure(context: &str, e: &StoreError) -> ExitCode {
    eprintln!("flowgate: {context}: {e}");
    match e {
        StoreError::NotFound(_) => ExitCode::NotFound,
        _ => ExitCode::Failure,
    }
}

fn print_json(value: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

/// `flowgate migrate`
pub async fn migrate(store: &Store, json: bool) -> ExitCode {
    match store.migrate().await {
        Ok(applied) => {
            if json {
                print_json(&json!({"applied": applied}));
            } else if applied.is_empty() {
                println!("migrations: nothing to apply, the schema is current");
            } else {
                for m in &applied {
                    println!("applied {m}");
                }
            }
            ExitCode::Success
        }
        Err(e) => store_failure("migrations failed", &e),
    }
}

/// `flowgate import FILE`
pub async fn import(store: &Store, file: &std::path::Path, json: bool) -> ExitCode {
    match import_file(store, file, OffsetDateTime::now_utc()).await {
        Ok(report) => {
            let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
            if json {
                print_json(&json!({
                    "changed": report.changed, "revision": report.revision,
                    "workspaces": report.workspaces, "apps": report.apps, "flows": report.flows,
                    "versions": report.versions, "placements": report.placements, "keys": report.keys,
                    "warnings": warnings,
                }));
            } else {
                for w in &warnings {
                    eprintln!("warning: {w}");
                }
                let verb = if report.changed {
                    "imported"
                } else {
                    "unchanged (already imported)"
                };
                println!(
                    "{}: {verb}: {} workspace(s), {} app(s), {} flow(s), {} version(s), {} placement(s), {} key(s); revision {}",
                    file.display(), report.workspaces, report.apps, report.flows, report.versions, report.placements, report.keys, report.revision
                );
            }
            ExitCode::Success
        }
        Err(ImportError::Invalid(problems)) => {
            if json {
                let list: Vec<_> = problems
                    .iter()
                    .map(|p| json!({"file": p.path.display().to_string(), "pointer": p.pointer, "message": p.message}))
                    .collect();
                print_json(&json!({"problems": list}));
            } else {
                eprintln!(
                    "{}: {} problem(s); nothing was written:",
                    file.display(),
                    problems.len()
                );
                for p in &problems {
                    eprintln!("  {p}");
                }
            }
            ExitCode::InvalidInput
        }
        Err(ImportError::Io { path, source }) => {
            eprintln!("flowgate: cannot read {}: {source}", path.display());
            ExitCode::Failure
        }
        Err(ImportError::Store(e)) => store_failure("the import failed; nothing was written", &e),
        Err(other) => {
            eprintln!("flowgate: {other}");
            ExitCode::Failure
        }
    }
}

fn record_json(r: &KeyRecord) -> serde_json::Value {
    json!({
        "id": r.id.to_string(), "workspace_id": r.workspace_id.to_string(), "display_prefix": r.display_prefix,
        "type": r.key_type.as_str(), "environment": r.environment.as_str(), "name": r.name,
        "created_at": r.created_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
        "revoked_at": r.revoked_at.and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok()),
    })
}

/// `flowgate keys ...`
pub async fn keys(store: &Store, command: KeysCommand) -> ExitCode {
    match command {
        KeysCommand::Create {
            workspace,
            key_environment,
            key_type,
            name,
            json,
        } => {
            match store
                .create_key(
                    WorkspaceId::from_uuid(workspace),
                    key_environment.into(),
                    key_type.into(),
                    name,
                    OffsetDateTime::now_utc(),
                )
                .await
            {
                Ok(created) => {
                    if json {
                        let mut v = record_json(&created.record);
                        v["key"] = json!(created.key.expose());
                        print_json(&v);
                    } else {
                        println!("{}", created.key.expose());
                        eprintln!(
                            "key {} created; this is the only time it is shown",
                            created.record.id
                        );
                    }
                    ExitCode::Success
                }
                Err(e) => store_failure("the key was not created", &e),
            }
        }
        KeysCommand::Revoke { id, json } => match store
            .revoke_key(KeyId::from_uuid(id), OffsetDateTime::now_utc())
            .await
        {
            Ok(record) => {
                if json {
                    print_json(&record_json(&record));
                } else {
                    println!("key {} ({}…) revoked", record.id, record.display_prefix);
                }
                ExitCode::Success
            }
            Err(e) => store_failure("the key was not revoked", &e),
        },
        KeysCommand::List { workspace, json } => {
            match store.list_keys(WorkspaceId::from_uuid(workspace)).await {
                Ok(records) => {
                    if json {
                        print_json(&json!(records.iter().map(record_json).collect::<Vec<_>>()));
                    } else {
                        println!(
                            "{:<36}  {:<12}  {:<6}  {:<4}  {:<20}  status",
                            "id", "prefix", "type", "env", "name"
                        );
                        for r in &records {
                            let status = if r.is_revoked() { "revoked" } else { "active" };
                            println!(
                                "{:<36}  {:<12}  {:<6}  {:<4}  {:<20}  {status}",
                                r.id, r.display_prefix, r.key_type, r.environment, r.name
                            );
                        }
                    }
                    ExitCode::Success
                }
                Err(e) => store_failure("keys could not be listed", &e),
            }
        }
    }
}

/// `flowgate demo`
pub async fn demo(store: &Store, config: &Config, json: bool) -> ExitCode {
    match demo::create(
        store,
        config.auth.key_environment,
        &serve::base_url(&config.server.listen),
    )
    .await
    {
        Ok(d) => {
            if json {
                print_json(&serde_json::to_value(&d).unwrap_or_default());
            } else {
                println!("{}", d.banner());
            }
            ExitCode::Success
        }
        Err(e) => {
            eprintln!("flowgate: {e}");
            ExitCode::Failure
        }
    }
}
