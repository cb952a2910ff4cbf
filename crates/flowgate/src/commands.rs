//! The commands other than `serve`, `ingest` and `catalog` (`catalog_cmd`): migrate, import,
//! keys, demo, events dead-letters. Human output goes to stdout,
//! logs to stderr; `--json` prints one JSON document for scripts.

use flowgate_control::import::{dry_run_file, import_file, DryRunReport, ImportError};
use flowgate_domain::delivery::{decode_event_in, reads_event_format, EVENT_JSON_READS};
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ids::{DeadLetterId, KeyId, WorkspaceId};
use flowgate_domain::keys::{KeyRecord, KeyType};
use flowgate_domain::people::{AuditAction, NewAuditEntry};
use flowgate_domain::ports::{
    AuditLog, DeadLetter, DeadLetterStore, EventStore, KeyStore, StoreError,
};
use flowgate_domain::text::rfc3339;
use flowgate_jetstream::{codec, Bus};
use flowgate_store::Store;
use serde_json::json;
use time::OffsetDateTime;

use crate::cli::{DeadLettersCommand, ExitCode, KeysCommand};
use crate::config::{Config, SinkKind};
use crate::terminal::{errln, outln};
use crate::{demo, serve};

/// Appends a `cli` entry; a failure is reported (the change itself is done).
pub(crate) async fn record_cli(
    store: &Store,
    action: AuditAction,
    target: Option<String>,
    detail: serde_json::Value,
) {
    let entry = NewAuditEntry {
        at: OffsetDateTime::now_utc(),
        actor: flowgate_control::import::CLI_ACTOR.to_owned(),
        action,
        target,
        comment: None,
        revision_before: None,
        revision_after: None,
        detail,
    };
    if let Err(e) = store.append_audit(entry).await {
        errln!("flowgate: warning: the audit entry was not written: {e}");
    }
}

pub(crate) fn store_failure(context: &str, e: &StoreError) -> ExitCode {
    errln!("flowgate: {context}: {e}");
    match e {
        StoreError::NotFound { .. } => ExitCode::NotFound,
        _ => ExitCode::Failure,
    }
}

pub(crate) fn print_json(value: &serde_json::Value) {
    crate::terminal::json(&serde_json::to_string_pretty(value).unwrap_or_default());
}

/// `flowgate migrate`: the database's migrations, then, with `events.sink = "jetstream"`, the
/// stream and the ingest consumer (D16).
pub async fn migrate(store: &Store, config: &Config, json: bool) -> ExitCode {
    let applied = match store.migrate().await {
        Ok(applied) => applied,
        Err(e) => return store_failure("migrations failed", &e),
    };
    // The events table's partitions for this configuration's accepted window (D21; the
    // migration made those of the default window). Retention is left to the running service.
    let window = flowgate_store::EventRetention {
        retention_days: 0,
        ..config.event_retention()
    };
    let partitions = match store
        .maintain_events(time::OffsetDateTime::now_utc(), window)
        .await
    {
        Ok(done) => done.partitions_created,
        Err(e) => return store_failure("creating the events table's partitions failed", &e),
    };
    let mut bus = None;
    if config.events.sink == SinkKind::Jetstream {
        let settings = &config.events.jetstream;
        let ensured = async {
            let connected = Bus::connect(settings, "flowgate-migrate").await?;
            connected.ensure().await
        }
        .await;
        match ensured {
            Ok((stream, consumer)) => bus = Some((settings, stream, consumer)),
            Err(e) => {
                errln!("flowgate: events.sink = \"jetstream\": {e}");
                return ExitCode::Failure;
            }
        }
    }
    if json {
        let mut out = json!({"applied": applied, "event_partitions_created": partitions});
        if let Some((settings, stream, consumer)) = &bus {
            out["stream"] = json!({"name": settings.stream, "replicas": settings.replicas, "result": stream.as_str()});
            out["consumer"] = json!({"name": settings.consumer, "result": consumer.as_str()});
        }
        print_json(&out);
    } else {
        if applied.is_empty() {
            outln!("migrations: nothing to apply, the schema is current");
        }
        for m in &applied {
            outln!("applied {m}");
        }
        if partitions > 0 {
            outln!("events table: {partitions} day partition(s) created");
        }
        if let Some((settings, stream, consumer)) = &bus {
            outln!(
                "stream {} ({} replica(s)): {}; consumer {}: {}",
                settings.stream,
                settings.replicas,
                stream.as_str(),
                settings.consumer,
                consumer.as_str()
            );
        }
    }
    ExitCode::Success
}

/// What a dead letter holds, read by its format (D17, D26).
enum LetterRead {
    /// Its events: one event, or a bus message's.
    Events(Vec<AnalyticsEvent>),
    /// A format this release does not read (a later release's): skipped by replay, kept.
    Unreadable(String),
    /// A format this release reads (or a message without one) whose payload is not events:
    /// refused, as any failed replay.
    Broken(String),
}

/// Whether this release reads letters in `format`: one event (`EVENT_JSON_READS`) or a bus
/// message (`codec::READS`); the empty format (a message without a format header) is read
/// as a message no release can read.
fn reads_letter_format(format: &str) -> bool {
    format.is_empty() || reads_event_format(format) || codec::reads(format)
}

/// The events of a dead letter, by its format: one event, or a bus message (D17).
fn letter_events(letter: &DeadLetter) -> LetterRead {
    let format = letter.format.as_str();
    if !reads_letter_format(format) {
        return LetterRead::Unreadable(format!(
            "format {format:?} is not one this release reads ({}, {}): left for a release that reads it",
            EVENT_JSON_READS.join(", "),
            codec::READS.join(", ")
        ));
    }
    let read = if reads_event_format(format) {
        decode_event_in(format, &letter.payload).map(|e| vec![e])
    } else {
        codec::decode(Some(format).filter(|f| !f.is_empty()), &letter.payload)
            .map_err(|e| e.to_string())
    };
    match read {
        Ok(events) => LetterRead::Events(events),
        Err(e) => LetterRead::Broken(e),
    }
}

fn letter_json(letter: &DeadLetter) -> serde_json::Value {
    let payload = serde_json::from_slice::<serde_json::Value>(&letter.payload)
        .unwrap_or_else(|_| json!(String::from_utf8_lossy(&letter.payload)));
    json!({
        "id": letter.id.to_string(),
        "event_id": letter.event_id.map(|id| id.to_string()),
        "format": letter.format,
        "readable": reads_letter_format(&letter.format),
        "error": letter.error,
        "attempts": letter.attempts,
        "first_attempt_at": rfc3339(letter.first_attempt_at),
        "last_attempt_at": rfc3339(letter.last_attempt_at),
        "payload": payload,
    })
}

/// Every letter (or the one with `id`), oldest first, read a page at a time.
async fn all_letters(
    store: &Store,
    id: Option<DeadLetterId>,
    limit: usize,
) -> Result<Vec<DeadLetter>, StoreError> {
    let mut letters = Vec::new();
    let mut after = None;
    loop {
        let page = store.list_dead_letters(after, 500).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        letters.extend(page.into_iter().filter(|l| id.is_none_or(|id| l.id == id)));
        if letters.len() >= limit {
            letters.truncate(limit);
            break;
        }
    }
    Ok(letters)
}

/// `flowgate events dead-letters list|replay`
pub async fn dead_letters(store: &Store, command: DeadLettersCommand) -> ExitCode {
    match command {
        DeadLettersCommand::List { limit, json } => {
            let letters = match all_letters(store, None, limit).await {
                Ok(letters) => letters,
                Err(e) => return store_failure("dead letters could not be read", &e),
            };
            if json {
                print_json(&json!(letters.iter().map(letter_json).collect::<Vec<_>>()));
            } else if letters.is_empty() {
                outln!("no dead letters");
            } else {
                outln!(
                    "{:<36}  {:<36}  {:>8}  {:<20}  error",
                    "id",
                    "event_id",
                    "attempts",
                    "last attempt"
                );
                for l in &letters {
                    let event = l
                        .event_id
                        .map_or_else(|| format!("(message, {})", l.format), |id| id.to_string());
                    let error = if reads_letter_format(&l.format) {
                        l.error.clone()
                    } else {
                        format!(
                            "{} [format {} is not read by this release: replay skips it]",
                            l.error, l.format
                        )
                    };
                    outln!(
                        "{:<36}  {:<36}  {:>8}  {:<20}  {}",
                        l.id,
                        event,
                        l.attempts,
                        rfc3339(l.last_attempt_at),
                        error
                    );
                }
            }
            ExitCode::Success
        }
        DeadLettersCommand::Replay { id, json } => {
            let id = id.map(DeadLetterId::from_uuid);
            let letters = match all_letters(store, id, usize::MAX).await {
                Ok(letters) => letters,
                Err(e) => return store_failure("dead letters could not be read", &e),
            };
            if let (Some(id), true) = (id, letters.is_empty()) {
                errln!("flowgate: no dead letter {id}");
                return ExitCode::NotFound;
            }
            let (mut replayed, mut inserted, mut duplicates) = (0usize, 0usize, 0usize);
            let mut refused = Vec::new();
            let mut skipped = Vec::new();
            for letter in &letters {
                let outcome = match letter_events(letter) {
                    LetterRead::Events(events) => store
                        .append_events(&events)
                        .await
                        .map_err(|e| e.to_string()),
                    LetterRead::Broken(e) => Err(e),
                    // Neither replayed, removed nor marked: a release that reads it will.
                    LetterRead::Unreadable(reason) => {
                        skipped.push((letter.id, letter.format.clone(), reason));
                        continue;
                    }
                };
                match outcome {
                    Ok(stored) => {
                        inserted += stored.inserted;
                        duplicates += stored.duplicates;
                        replayed += 1;
                        if let Err(e) = store.remove_dead_letter(letter.id).await {
                            return store_failure("a replayed dead letter was not removed", &e);
                        }
                    }
                    Err(error) => {
                        if let Err(e) = store
                            .record_dead_letter_attempt(
                                letter.id,
                                &error,
                                OffsetDateTime::now_utc(),
                            )
                            .await
                        {
                            return store_failure("a replay could not be recorded", &e);
                        }
                        refused.push((letter.id, error));
                    }
                }
            }
            if json {
                print_json(&json!({
                    "replayed": replayed, "events_stored": inserted, "events_already_stored": duplicates,
                    "refused": refused.iter().map(|(id, error)| json!({"id": id.to_string(), "error": error})).collect::<Vec<_>>(),
                    "skipped": skipped.iter().map(|(id, format, reason)| json!({"id": id.to_string(), "format": format, "reason": reason})).collect::<Vec<_>>(),
                }));
            } else {
                outln!(
                    "replayed {replayed} dead letter(s): {inserted} event(s) stored, {duplicates} already stored; {} still refused; {} skipped",
                    refused.len(),
                    skipped.len()
                );
                for (id, error) in &refused {
                    outln!("  {id}: {error}");
                }
                for (id, _, reason) in &skipped {
                    outln!("  {id}: skipped: {reason}");
                }
            }
            if refused.is_empty() {
                ExitCode::Success
            } else {
                ExitCode::Failure
            }
        }
    }
}

/// Problems of a file the import refuses, and failures to read it or reach the store.
/// `flowgate import FILE --author EMAIL` under review: the proposal, or why not.
async fn propose_import(
    store: &Store,
    file: &std::path::Path,
    email: &str,
    json: bool,
) -> ExitCode {
    use flowgate_control::review::import::ProposeFailure;
    match flowgate_control::review::import::propose(store, file, email).await {
        Ok(record) if json => {
            print_json(&json!({
                "change_id": record.id.to_string(), "state": record.state.as_str(),
                "author": record.author, "summary": record.summary,
            }));
            ExitCode::Success
        }
        Ok(record) => {
            outln!(
                "proposed change {} by {}: {}; another editor or admin approves it in the console",
                record.id,
                record.author,
                record.summary
            );
            ExitCode::Success
        }
        Err(ProposeFailure::NotAnEditor) => {
            errln!(
                "flowgate: --author {email:?} is not an editor or admin who may propose changes"
            );
            ExitCode::InvalidInput
        }
        Err(ProposeFailure::File(e)) => import_failure(file, e, json),
        Err(ProposeFailure::Invalid(why)) => {
            errln!("flowgate: {}: {why}", file.display());
            ExitCode::InvalidInput
        }
        Err(ProposeFailure::Store(e)) => store_failure("the import was not proposed", &e),
    }
}

fn import_failure(file: &std::path::Path, error: ImportError, json: bool) -> ExitCode {
    match error {
        ImportError::Invalid(problems) => {
            if json {
                let list: Vec<_> = problems
                    .iter()
                    .map(|p| json!({"file": p.path.display().to_string(), "pointer": p.pointer, "message": p.message}))
                    .collect();
                print_json(&json!({"problems": list}));
            } else {
                errln!(
                    "{}: {} problem(s); nothing was written:",
                    file.display(),
                    problems.len()
                );
                for p in &problems {
                    errln!("  {p}");
                }
            }
            ExitCode::InvalidInput
        }
        ImportError::Io { path, source } => {
            errln!("flowgate: cannot read {}: {source}", path.display());
            ExitCode::Failure
        }
        ImportError::Store(e) => store_failure("the import failed; nothing was written", &e),
        other => {
            errln!("flowgate: {other}");
            ExitCode::Failure
        }
    }
}

fn percent(share: f64) -> String {
    format!("{:.2}%", share * 100.0)
}

/// `flowgate import --dry-run FILE` (D19): what the import would change, written nowhere.
async fn dry_run(store: &Store, file: &std::path::Path, json: bool) -> ExitCode {
    let DryRunReport { report, diff } =
        match dry_run_file(store, file, OffsetDateTime::now_utc()).await {
            Ok(done) => done,
            Err(e) => return import_failure(file, e, json),
        };
    let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
    if json {
        print_json(&json!({
            "dry_run": true, "changed": report.changed, "revision": report.revision,
            "workspaces": report.workspaces, "apps": report.apps, "flows": report.flows,
            "versions": report.versions, "placements": report.placements, "keys": report.keys,
            "warnings": warnings, "changes": diff.entities, "rule_lists": diff.placements,
            "experiments": diff.experiments,
        }));
        return ExitCode::Success;
    }
    outln!(
        "{}: valid; dry run, nothing written (the store is at revision {})",
        file.display(),
        report.revision
    );
    if !report.changed {
        outln!("no change: the store already holds everything in this file");
        return ExitCode::Success;
    }
    if !diff.entities.is_empty() {
        outln!("changes:");
        for e in &diff.entities {
            let change = serde_json::to_value(e.change).unwrap_or_default();
            let change = change.as_str().unwrap_or_default();
            let detail = if e.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", e.detail)
            };
            outln!("  {change} {} {} `{}`{detail}", e.entity, e.id, e.name);
        }
    }
    if !diff.placements.is_empty() {
        outln!("rule lists:");
        for p in &diff.placements {
            let rules: Vec<String> = p
                .rules
                .iter()
                .map(|r| format!("rule {}: {}", r.rule, r.change.join(", ")))
                .collect();
            let default = if p.default_changed {
                "; default flow changed"
            } else {
                ""
            };
            outln!(
                "  {}/{}: {} -> {} rule(s); {}{default}",
                p.app_id,
                p.key,
                p.rules_before,
                p.rules_after,
                rules.join("; ")
            );
        }
    }
    if !diff.experiments.is_empty() {
        outln!("experiments whose users move (shares of the users who reach the rule):");
        for e in &diff.experiments {
            let status = |s: Option<flowgate_domain::catalog::ExperimentStatus>| {
                s.map_or("absent", |s| s.as_str())
            };
            outln!(
                "  `{}` ({}) in {}/{}, {} -> {}:",
                e.name,
                e.id,
                e.app_id,
                e.placement_key,
                status(e.status_before),
                status(e.status_after)
            );
            outln!(
                "    change variant {}, enter {}, leave {}, keep variant {}, outside {}",
                percent(e.change_variant),
                percent(e.enter),
                percent(e.leave),
                percent(e.keep_variant),
                percent(e.outside)
            );
            let variants: Vec<String> = e
                .variants
                .iter()
                .map(|v| format!("{} {} -> {}", v.name, percent(v.before), percent(v.after)))
                .collect();
            outln!("    variants: {}", variants.join("; "));
            if e.rule_changed {
                outln!("    its rule's audience or position changes too: the shares are of users who reach it both before and after");
            }
            if let Some(sticky) = &e.sticky {
                outln!("    sticky: {}", sticky.note);
            }
        }
    }
    for w in &warnings {
        outln!("warning: {w}");
    }
    ExitCode::Success
}

/// `flowgate import [--dry-run] FILE`
pub async fn import(
    store: &Store,
    file: &std::path::Path,
    dry: bool,
    (review, author, apply_now): (bool, Option<String>, bool),
    json: bool,
) -> ExitCode {
    if dry {
        return dry_run(store, file, json).await;
    }
    // D35: with review, an import moves users like any change: proposed, or break-glass.
    let comment = match (review, author) {
        (false, Some(_)) => {
            errln!(
                "flowgate: --author proposes an import for review, and catalog.require_review \
                 is off: import without --author"
            );
            return ExitCode::InvalidInput;
        }
        (true, Some(email)) => return propose_import(store, file, &email, json).await,
        (true, None) if !apply_now => {
            errln!(
                "flowgate: catalog.require_review is on: an import waits for review. --author \
                 EMAIL proposes it as that editor, for another editor or admin to approve in \
                 the console; --apply-now imports at once (break-glass, audited)"
            );
            return ExitCode::InvalidInput;
        }
        (true, None) => Some("break-glass: imported with --apply-now under catalog.require_review"),
        (false, None) => None,
    };
    let imported = match comment {
        None => import_file(store, file, OffsetDateTime::now_utc()).await,
        Some(comment) => flowgate_control::review::import::import_now(store, file, comment).await,
    };
    match imported {
        Ok(report) => {
            let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
            if json {
                print_json(&json!({
                    "changed": report.changed, "revision": report.revision, "sha256": report.sha256,
                    "workspaces": report.workspaces, "apps": report.apps, "flows": report.flows,
                    "versions": report.versions, "placements": report.placements, "keys": report.keys,
                    "warnings": warnings,
                }));
            } else {
                for w in &warnings {
                    errln!("warning: {w}");
                }
                let verb = if report.changed {
                    "imported"
                } else {
                    "unchanged (already imported)"
                };
                outln!(
                    "{}: {verb}: {} workspace(s), {} app(s), {} flow(s), {} version(s), {} placement(s), {} key(s); revision {}",
                    file.display(), report.workspaces, report.apps, report.flows, report.versions, report.placements, report.keys, report.revision
                );
            }
            ExitCode::Success
        }
        Err(e) => import_failure(file, e, json),
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
            let key_type: KeyType = key_type.into();
            let name = name.unwrap_or_else(|| format!("{key_type} key"));
            match flowgate_control::keys::create(
                store,
                WorkspaceId::from_uuid(workspace),
                key_environment.into(),
                key_type,
                name,
                OffsetDateTime::now_utc(),
            )
            .await
            {
                Ok(created) => {
                    record_cli(
                        store,
                        AuditAction::KeyCreate,
                        Some(created.record.id.to_string()),
                        json!({"workspace_id": workspace.to_string(), "type": key_type.to_string()}),
                    )
                    .await;
                    if json {
                        let mut v = record_json(&created.record);
                        v["key"] = json!(created.key.expose());
                        print_json(&v);
                    } else {
                        outln!("{}", created.key.expose());
                        errln!(
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
                record_cli(
                    store,
                    AuditAction::KeyRevoke,
                    Some(record.id.to_string()),
                    json!({"workspace_id": record.workspace_id.to_string()}),
                )
                .await;
                if json {
                    print_json(&record_json(&record));
                } else {
                    outln!("key {} ({}…) revoked", record.id, record.display_prefix);
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
                        outln!(
                            "{:<36}  {:<12}  {:<7}  {:<4}  {:<20}  status",
                            "id",
                            "prefix",
                            "type",
                            "env",
                            "name"
                        );
                        for r in &records {
                            let status = if r.is_revoked() { "revoked" } else { "active" };
                            // `as_str`: the types' `Display` ignores the width.
                            outln!(
                                "{:<36}  {:<12}  {:<7}  {:<4}  {:<20}  {status}",
                                r.id,
                                r.display_prefix,
                                r.key_type.as_str(),
                                r.environment.as_str(),
                                r.name
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
                crate::terminal::lines(&d.banner());
            }
            ExitCode::Success
        }
        Err(e) => {
            errln!("flowgate: {e}");
            ExitCode::Failure
        }
    }
}
