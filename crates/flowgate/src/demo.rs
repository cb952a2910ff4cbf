//! The demo workspace (D13 `flowgate demo`, and the embedded default's first start): an app
//! with an onboarding flow and a paywall experiment, imported through the same validated path
//! as any catalog file, plus a fresh SDK key and copy-paste curl commands.

use std::path::Path;

use flowgate_control::import::import_text;
use flowgate_control::import::FileFormat;
use flowgate_control::import::ImportError;
use flowgate_domain::ids::WorkspaceId;
use flowgate_domain::keys::{KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::people::{AuditAction, NewAuditEntry};
use flowgate_domain::ports::AuditLog as _;
use flowgate_http::apple_demo_signer::DemoSigner;
use flowgate_store::Store;
use serde::Serialize;
use time::OffsetDateTime;

/// The demo workspace.
pub const WORKSPACE: &str = "d0000000-0000-4000-8000-000000000001";
/// The demo app.
pub const APP: &str = "d0000000-0000-4000-8000-0000000000a1";
/// The demo app's paywall experiment (`paywall-price-test`: control against trial).
pub const EXPERIMENT: &str = "d0000000-0000-4000-8000-0000000000c1";
/// The demo experiment's variants (`VARA`, `VARB` of the catalog below).
pub const VARIANTS: [&str; 2] = [
    "d0000000-0000-4000-8000-0000000000b1",
    "d0000000-0000-4000-8000-0000000000b2",
];
/// The demo app's App Store bundle id (`apple_bundle_id`, D30).
pub const APPLE_BUNDLE_ID: &str = "com.example.flowgate.demo";
const FLOW_WELCOME: &str = "d0000000-0000-4000-8000-0000000000f1";
const VERSION_WELCOME: &str = "d0000000-0000-4000-8000-0000000000e1";

fn catalog() -> String {
    let text = r#"{
  "format": 2,
  "workspaces": [{
    "id": "WS", "name": "Demo workspace",
    "apps": [{
      "id": "APP", "name": "Demo app",
      "media_base_url": "https://cdn.example.com/demo/media/",
      "icon_base_url": "https://cdn.example.com/demo/icons/",
      "cache_ttl_seconds": 300,
      "apple_bundle_id": "com.example.flowgate.demo",
      "apple_environments": ["Sandbox"],
      "saved_groups": {"beta_testers": ["demo-beta-1", "demo-beta-2"]},
      "flows": [
        {"id": "FW", "name": "Welcome onboarding", "published_version": 1, "versions": [
          {"id": "VW", "version": 1, "schema_version": 1, "fonts": [
             {"family": "Inter", "weight": 400, "style": "normal", "url": "https://cdn.example.com/demo/fonts/inter-400.woff2"}],
           "flow_schema": {"screens": [
             {"id": "welcome", "type": "hero", "title": "Welcome to the demo", "image": "welcome.png"},
             {"id": "goals", "type": "choice", "title": "What brings you here?", "options": ["Learn", "Build", "Explore"]},
             {"id": "done", "type": "finish", "title": "You're all set"}]}}]},
        {"id": "FA", "name": "Paywall A", "published_version": 1, "versions": [
          {"id": "VA", "version": 1, "schema_version": 1, "fonts": [],
           "flow_schema": {"screens": [{"id": "paywall", "type": "paywall", "plans": ["monthly", "annual"]}]}}]},
        {"id": "FB", "name": "Paywall B", "published_version": 1, "versions": [
          {"id": "VB", "version": 1, "schema_version": 1, "fonts": [],
           "flow_schema": {"screens": [{"id": "paywall", "type": "paywall", "plans": ["annual"], "trial_days": 7}]}}]}
      ],
      "placements": [
        {"key": "onboarding", "default_flow_id": "FW", "rules": [
          {"audience": {"user_id": {"$inGroup": "beta_testers"}}, "flow_id": "FW"}]},
        {"key": "paywall", "default_flow_id": "FA", "rules": [
          {"audience": {"country": {"$in": ["US", "CA", "GB"]}}, "experiment": {
            "id": "EXP", "name": "paywall-price-test", "status": "running", "coverage": 1.0,
            "analysis": {"primary_metric": "purchase_complete", "guardrail_metrics": ["proceeds"]},
            "variants": [
              {"id": "VARA", "name": "control", "weight": 1, "flow_id": "FA"},
              {"id": "VARB", "name": "trial", "weight": 1, "flow_id": "FB"}]}}]}
      ]
    }]
  }]
}"#;
    text.replace("\"WS\"", &format!("\"{WORKSPACE}\""))
        .replace("\"APP\"", &format!("\"{APP}\""))
        .replace("\"FW\"", &format!("\"{FLOW_WELCOME}\""))
        .replace("\"VW\"", &format!("\"{VERSION_WELCOME}\""))
        .replace("\"FA\"", "\"d0000000-0000-4000-8000-0000000000f2\"")
        .replace("\"VA\"", "\"d0000000-0000-4000-8000-0000000000e2\"")
        .replace("\"FB\"", "\"d0000000-0000-4000-8000-0000000000f3\"")
        .replace("\"VB\"", "\"d0000000-0000-4000-8000-0000000000e3\"")
        .replace("\"EXP\"", &format!("\"{EXPERIMENT}\""))
        .replace("\"VARA\"", "\"d0000000-0000-4000-8000-0000000000b1\"")
        .replace("\"VARB\"", "\"d0000000-0000-4000-8000-0000000000b2\"")
}

/// What `flowgate demo` prints.
#[derive(Debug, Serialize)]
pub struct Demo {
    /// The SDK key (shown once).
    pub key: String,
    /// The demo workspace id.
    pub workspace_id: String,
    /// The demo app id.
    pub app_id: String,
    /// The API base URL the commands use.
    pub base_url: String,
    /// Resolve, batch resolve and event commands.
    pub commands: Vec<String>,
}

/// Why the demo could not be created.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The demo catalog did not import.
    #[error("the demo catalog did not import: {0}")]
    Import(#[from] ImportError),
    /// The key could not be stored.
    #[error("the demo key could not be created: {0}")]
    Key(#[from] flowgate_domain::ports::StoreError),
}

/// The demo's App Store signer (`stores.demo_apple_signer`, D30): read from `path`, or, with
/// `create`, generated and written there when the file does not exist (readable by its owner
/// only). Concurrent creators agree: the file appears whole, once (written aside, then linked
/// into place, which fails when another was first), and the loser reads the winner's.
pub fn apple_signer(path: &Path, create: bool) -> Result<DemoSigner, String> {
    let read = |path: &Path| -> Result<DemoSigner, String> {
        let text =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        DemoSigner::from_pem(&text).map_err(|e| format!("{}: {e}", path.display()))
    };
    if !create || path.exists() {
        return read(path);
    }
    let signer = DemoSigner::generate()
        .map_err(|e| format!("cannot generate the demo's App Store signer: {e}"))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let aside = path.with_extension(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
    let written = write_private(&aside, signer.to_pem().as_bytes())
        .and_then(|()| std::fs::hard_link(&aside, path));
    let _ = std::fs::remove_file(&aside);
    match written {
        Ok(()) => Ok(signer),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(path),
        Err(e) => Err(format!("cannot write {}: {e}", path.display())),
    }
}

/// Writes a new file readable and writable by its owner only.
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// A fresh webhook key (D30) of the demo workspace, for `demo --traffic`'s RevenueCat
/// notifications.
pub async fn webhook_key(store: &Store, environment: KeyEnvironment) -> Result<String, DemoError> {
    let workspace: WorkspaceId = WORKSPACE.parse().map_err(|_| {
        DemoError::Key(flowgate_domain::ports::StoreError::Other {
            detail: "demo workspace id".into(),
        })
    })?;
    let created = flowgate_control::keys::create(
        store,
        workspace,
        environment,
        KeyType::Webhook,
        "demo webhook",
        OffsetDateTime::now_utc(),
    )
    .await?;
    record_key(store, &created.record).await;
    Ok(created.key.expose().to_owned())
}

/// Records a demo key's creation in the audit log (D28) as `cli`, as `flowgate keys create`
/// does: the key seeded at first start and those of `flowgate demo [--traffic]` are keys like
/// any other, and an audit log that missed them would not say where a working key came from
/// (issue 65). A failure is logged; the key exists either way.
async fn record_key(store: &Store, record: &KeyRecord) {
    let entry = NewAuditEntry {
        at: OffsetDateTime::now_utc(),
        actor: flowgate_control::import::CLI_ACTOR.to_owned(),
        action: AuditAction::KeyCreate,
        target: Some(record.id.to_string()),
        comment: None,
        revision_before: None,
        revision_after: None,
        detail: serde_json::json!({
            "workspace_id": record.workspace_id.to_string(), "type": record.key_type.to_string(),
            "environment": record.environment.to_string(), "name": record.name,
        }),
    };
    if let Err(e) = store.append_audit(entry).await {
        tracing::warn!(error = %e, key = %record.id, "the demo key's audit entry was not written");
    }
}

/// Imports the demo catalog (idempotent) and creates a fresh SDK key of `environment`.
pub async fn create(
    store: &Store,
    environment: KeyEnvironment,
    base_url: &str,
) -> Result<Demo, DemoError> {
    let now = OffsetDateTime::now_utc();
    import_text(
        store,
        Path::new("demo-catalog.json"),
        FileFormat::Json,
        &catalog(),
        now,
    )
    .await?;
    let workspace: WorkspaceId = WORKSPACE.parse().map_err(|_| {
        DemoError::Key(flowgate_domain::ports::StoreError::Other {
            detail: "demo workspace id".into(),
        })
    })?;
    let created =
        flowgate_control::keys::create(store, workspace, environment, KeyType::Sdk, "demo", now)
            .await?;
    record_key(store, &created.record).await;
    let key = created.key.expose().to_owned();
    Ok(Demo {
        commands: commands(base_url, &key, now),
        key,
        workspace_id: WORKSPACE.to_owned(),
        app_id: APP.to_owned(),
        base_url: base_url.to_owned(),
    })
}

fn commands(base: &str, key: &str, now: OffsetDateTime) -> Vec<String> {
    let app = APP;
    let auth = format!("-H 'Authorization: Bearer {key}' -H 'Content-Type: application/json'");
    let timestamp = now
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    vec![
        format!(
            "curl -s -X POST {base}/v1/apps/{app}/placements/onboarding/resolve {auth} -d '{{\"user_id\": \"demo-user\", \"session_id\": \"demo-session\", \"device_platform\": \"ios\", \"attributes\": {{\"country\": \"US\"}}}}'"
        ),
        format!(
            "curl -s -X POST {base}/v1/apps/{app}/placements/resolve-batch {auth} -d '{{\"placement_keys\": [\"onboarding\", \"paywall\"], \"user_id\": \"demo-user\", \"session_id\": \"demo-session\", \"device_platform\": \"web\", \"attributes\": {{\"country\": \"US\"}}}}'"
        ),
        format!(
            "curl -s -X POST {base}/v1/apps/{app}/events {auth} -d '{{\"event_id\": \"{event}\", \"app_id\": \"{app}\", \"flow_id\": \"{flow}\", \"flow_version_id\": \"{version}\", \"user_id\": \"demo-user\", \"session_id\": \"demo-session\", \"device_platform\": \"ios\", \"event_type\": \"flow_open\", \"timestamp\": \"{timestamp}\", \"sdk_version\": \"demo\"}}'",
            event = uuid::Uuid::new_v4(),
            flow = FLOW_WELCOME,
            version = VERSION_WELCOME,
        ),
    ]
}

impl Demo {
    /// The human-readable banner.
    pub fn banner(&self) -> String {
        let mut out = String::new();
        out.push_str("\nflowgate demo workspace is ready.\n\n");
        out.push_str(&format!("  SDK key (shown once): {}\n", self.key));
        out.push_str(&format!(
            "  workspace: {}\n  app:       {}\n\n",
            self.workspace_id, self.app_id
        ));
        out.push_str("Try it:\n\n");
        for c in &self.commands {
            out.push_str(c);
            out.push_str("\n\n");
        }
        out.push_str(
            "Simulate 2000 users of the paywall experiment through this API and read which \
             variant wins\n(from the checkout, while this server runs):\n\n\
             cargo run -q -p flowgate -- demo --traffic 2000\n\n",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_demo_signer_is_created_once_private_and_read_back_by_concurrent_starts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("signer.pem");
        // Reading alone does not create it.
        let err = apple_signer(&path, false).unwrap_err();
        assert!(
            err.contains("cannot read") && err.contains("signer.pem"),
            "{err}"
        );
        assert!(!path.exists());
        // Eight starts at once: one signer, which all of them trust.
        let roots: Vec<_> = std::thread::scope(|scope| {
            let starts: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| apple_signer(&path, true).unwrap().roots()))
                .collect();
            starts.into_iter().map(|s| s.join().unwrap()).collect()
        });
        assert!(roots.windows(2).all(|pair| pair[0] == pair[1]));
        assert_eq!(apple_signer(&path, false).unwrap().roots(), roots[0]);
        // Nothing left aside.
        let files = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(files, 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
