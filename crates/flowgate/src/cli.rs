//! The command line (D13). Exit codes are part of the interface scripts rely on
//! ([`ExitCode`]).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use flowgate_domain::keys::{KeyEnvironment, KeyType};

use crate::config::Environment;

/// This release's version and commit (D26), as `flowgate --version` prints them.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("FLOWGATE_COMMIT"),
    ")"
);

/// The release's commit (see build.rs).
pub const COMMIT: &str = env!("FLOWGATE_COMMIT");

/// Most entries a `--limit` lists at once.
pub const MAX_LIMIT: u64 = 10_000;

/// `--limit`: 1 to [`MAX_LIMIT`]. Out of it, clap refuses the command (exit 2) naming the
/// flag, the value and the range, before anything is read: 0 listed nothing, and a number
/// beyond what the store's query takes failed there.
fn limit() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_LIMIT)
}

/// flowgate: decides which onboarding or paywall flow an app shows, and collects what users do
/// in it.
#[derive(Debug, Parser)]
#[command(name = "flowgate", version = VERSION, about, long_about = None)]
pub struct Cli {
    /// Deployment environment: selects `config/<ENV>.toml` and its rules.
    #[arg(
        long = "env",
        value_enum,
        env = "FLOWGATE_ENV",
        default_value = "development"
    )]
    pub environment: Environment,
    /// An extra configuration file, applied after `config/<ENV>.toml`.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API and the admin listener until SIGTERM or Ctrl-C.
    Serve,
    /// Apply pending database migrations, then exit.
    Migrate {
        /// Print the applied migrations as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Import a catalog file (JSON, or YAML by extension): validated whole, applied in one
    /// transaction, nothing written when any problem exists.
    Import {
        /// The catalog file.
        file: PathBuf,
        /// Validate and print what would change (entities, rule lists, the share of each
        /// running experiment's users who would move), writing nothing (D19).
        #[arg(long)]
        dry_run: bool,
        /// With `catalog.require_review`: propose the import as this editor or admin (an
        /// email), for another to approve in the console (D35).
        #[arg(long, conflicts_with_all = ["apply_now", "dry_run"])]
        author: Option<String>,
        /// With `catalog.require_review`: import at once without review (break-glass, audited
        /// as such).
        #[arg(long)]
        apply_now: bool,
        /// Print the report (or the problems) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Explain a resolve on the stored catalog (D18): the result resolve would answer, each
    /// rule's audience and experiment step, and the reason. Records nothing.
    Explain {
        /// The app id.
        #[arg(long)]
        app: String,
        /// The placement key.
        #[arg(long)]
        placement: String,
        /// The resolve request body: JSON, `@FILE`, or `-` for standard input.
        #[arg(long)]
        body: String,
        /// Print `{"result": ..., "trace": [...], "reason": "..."}`.
        #[arg(long)]
        json: bool,
    },
    /// The catalog's import history and its export as an importable file (D19).
    Catalog {
        /// The catalog operation.
        #[command(subcommand)]
        command: CatalogCommand,
    },
    /// Manage API keys.
    Keys {
        /// The key operation.
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Manage the people who sign in to the console (D28).
    Users {
        /// The operation.
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Read the audit log (D28).
    Audit {
        /// The operation.
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Catalog changes (D28): scheduled ones (D29), the proposed ones, cancelling one.
    Changes {
        /// The operation.
        #[command(subcommand)]
        command: ChangesCommand,
    },
    /// Staged rollouts of a new flow, rolled back by themselves when a guardrail gets worse
    /// (D29).
    Rollouts {
        /// The operation.
        #[command(subcommand)]
        command: RolloutsCommand,
    },
    /// Create a demo workspace with an app, flows and placements, and print a key and
    /// ready-to-paste curl commands. With `--traffic N`, send N simulated users of its paywall
    /// experiment through the API of the flowgate serving at `server.listen`, then print the
    /// experiment's report (D22).
    Demo {
        /// Print the key, ids and commands (with `--traffic`, the report) as JSON.
        #[arg(long)]
        json: bool,
        /// Simulated users to send (1 to 1000000).
        #[arg(long, value_name = "USERS", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        traffic: Option<u64>,
    },
    /// Consume the event stream into the store until SIGTERM or Ctrl-C (events.sink =
    /// "jetstream"; run as many processes as needed).
    Ingest,
    /// Experiment results (D22): which variant wins, from the stored events.
    Experiments {
        /// The experiments operation.
        #[command(subcommand)]
        command: ExperimentsCommand,
    },
    /// Analytics events: dead letters.
    Events {
        /// The events operation.
        #[command(subcommand)]
        command: EventsCommand,
    },
}

/// `flowgate catalog ...`
#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// List the applied catalog imports, newest first: revision, time, SHA-256 of the file,
    /// file name and what the file held. An import that changed nothing is not listed.
    History {
        /// Show at most this many.
        #[arg(long, default_value_t = 20, value_parser = limit())]
        limit: usize,
        /// Print a JSON array (full SHA-256).
        #[arg(long)]
        json: bool,
    },
    /// Write the stored catalog as a catalog file that `flowgate import` reads (JSON), without
    /// API keys: importing it changes no key.
    Export {
        /// Only this workspace.
        #[arg(long)]
        workspace: Option<uuid::Uuid>,
        /// Write the file here (atomically: a temporary file, then a rename) instead of to
        /// standard output.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

/// `flowgate experiments ...`
#[derive(Debug, Subcommand)]
pub enum ExperimentsCommand {
    /// The catalog's experiments: app, placement, status, variants and exposed users.
    List {
        /// Only this app's experiments.
        #[arg(long, value_name = "APP_ID")]
        app: Option<String>,
        /// Print D22's JSON.
        #[arg(long)]
        json: bool,
    },
    /// One experiment's report: the verdict first (D27), then per variant exposed users, each
    /// metric with its lift, 95% interval, p-value and chance to win; the sample ratio check;
    /// warnings.
    Results {
        /// The experiment id.
        experiment: String,
        /// Only users first exposed at or after this time (RFC 3339, e.g.
        /// 2026-11-01T00:00:00Z).
        #[arg(long, value_name = "RFC3339")]
        from: Option<String>,
        /// Events up to this time (RFC 3339; default now).
        #[arg(long, value_name = "RFC3339")]
        to: Option<String>,
        /// Also report this event type as a conversion (repeatable).
        #[arg(long = "metric", value_name = "EVENT_TYPE")]
        metrics: Vec<String>,
        /// The test for this report only: `sequential` (valid however often read) or `fixed`
        /// (one look at a horizon set in advance); default: the experiment's analysis settings.
        #[arg(long, value_name = "fixed|sequential")]
        method: Option<String>,
        /// Store metrics (D30) count transactions bought within this many days of a user's
        /// first exposure (default: `stores.horizon_days`).
        #[arg(long, value_name = "DAYS")]
        horizon: Option<String>,
        /// Print D22's JSON (with the daily series and the decision).
        #[arg(long)]
        json: bool,
    },
}

/// `flowgate events ...`
#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Events the store refused for good, and bus messages that could not be decoded or
    /// stored (D17).
    DeadLetters {
        /// The dead letters operation.
        #[command(subcommand)]
        command: DeadLettersCommand,
    },
}

/// `flowgate events dead-letters ...`
#[derive(Debug, Subcommand)]
pub enum DeadLettersCommand {
    /// List dead letters, oldest first.
    List {
        /// Show at most this many.
        #[arg(long, default_value_t = 100, value_parser = limit())]
        limit: usize,
        /// Print JSON (each letter with its payload).
        #[arg(long)]
        json: bool,
    },
    /// Store dead letters again (all, or one by id): a letter whose events are stored is
    /// removed, one refused again is kept with the new error.
    Replay {
        /// Only this letter.
        #[arg(long)]
        id: Option<uuid::Uuid>,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `flowgate keys ...`
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key; the plaintext is printed once and never stored.
    Create {
        /// The workspace id.
        #[arg(long)]
        workspace: uuid::Uuid,
        /// The key environment: live (production) or test (staging, development).
        #[arg(long = "env", value_enum)]
        key_environment: KeyEnv,
        /// The key type: sdk (the SDK routes), webhook (the store notification routes, D30)
        /// or secret.
        #[arg(long = "type", value_enum, default_value = "sdk")]
        key_type: KeyKind,
        /// A name to recognise the key by [default: the type and " key", e.g. "webhook key"]
        #[arg(long)]
        name: Option<String>,
        /// Print the key and its record as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by its record id (`keys list` shows it).
    Revoke {
        /// The key record id.
        id: uuid::Uuid,
        /// Print the revoked record as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List a workspace's keys (never the keys themselves).
    List {
        /// The workspace id.
        #[arg(long)]
        workspace: uuid::Uuid,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `flowgate users ...` (D28).
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Add a person and print a one-time link (24 h) where they set a password.
    Add {
        /// Their email address.
        email: String,
        /// What they may do.
        #[arg(long, value_enum)]
        role: RoleArg,
        /// The console's address, put before the link's path [default: http:// and
        /// `admin.listen`].
        #[arg(long)]
        base_url: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a new one-time link for a person (a forgotten password; earlier links still
    /// work until used or expired).
    Link {
        /// Their email address.
        email: String,
        /// As for `add`.
        #[arg(long)]
        base_url: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the people.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Change a person's role (their open sessions end: they sign in again with the new one).
    SetRole {
        /// Their email address.
        email: String,
        /// The new role.
        #[arg(value_enum)]
        role: RoleArg,
    },
    /// Disable a person: they cannot sign in, and their sessions end.
    Disable {
        /// Their email address.
        email: String,
    },
    /// Enable a disabled person again.
    Enable {
        /// Their email address.
        email: String,
    },
}

/// A console role (D28).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RoleArg {
    /// Every page, explain, preview.
    Viewer,
    /// Also changes the catalog and manages keys.
    Editor,
    /// Also manages people.
    Admin,
}

impl From<RoleArg> for flowgate_domain::people::Role {
    fn from(r: RoleArg) -> Self {
        match r {
            RoleArg::Viewer => Self::Viewer,
            RoleArg::Editor => Self::Editor,
            RoleArg::Admin => Self::Admin,
        }
    }
}

/// `flowgate changes ...` (D28, D29).
#[derive(Debug, Subcommand)]
pub enum ChangesCommand {
    /// Schedule a catalog change (its JSON, as `formats/flowgate.catalog-change/` shows) for a
    /// time: the scheduler applies it then, to the catalog as it is then, as `scheduler`.
    /// Like `flowgate import`, this is an operator's act: it does not wait for review.
    Schedule {
        /// The change's JSON file (`-`: standard input).
        file: PathBuf,
        /// When (RFC 3339).
        #[arg(long)]
        at: String,
        /// Why, for the audit log.
        #[arg(long, default_value = "")]
        comment: String,
        /// Print the change as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Proposed and scheduled changes, newest first.
    List {
        /// Only changes in this state (`pending`, `applied`, `withdrawn`, `failed`).
        #[arg(long)]
        state: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100, value_parser = limit())]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a pending (scheduled or proposed) change: it is withdrawn, as `cli`.
    Cancel {
        /// The change's id.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reject a pending change with why (D35): it is `rejected`, as `cli`, and its author
    /// reads the comment on the change's page.
    Reject {
        /// The change's id.
        id: String,
        /// Why it is rejected (required).
        #[arg(long)]
        comment: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `flowgate rollouts ...` (D29).
#[derive(Debug, Subcommand)]
pub enum RolloutsCommand {
    /// Start a rollout: the placement's first rule that serves a flow moves to `--flow` in
    /// steps; prints the rollout's id.
    Start {
        /// The app id.
        #[arg(long)]
        app: String,
        /// The placement key.
        #[arg(long)]
        placement: String,
        /// The new flow's id (the rule's own flow for a new version of it).
        #[arg(long)]
        flow: String,
        /// The version of the flow to roll out, published or not (completion publishes it);
        /// default: the version the flow publishes.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        version: Option<u32>,
        /// The share of users on the new flow at each step, in percent, the last 100.
        #[arg(long, value_delimiter = ',', default_value = "1,5,25,50,100")]
        steps: Vec<f64>,
        /// How long each step is held at least (`90s`, `15m`, `24h`, `7d`).
        #[arg(long, default_value = "24h")]
        hold: String,
        /// Users the new flow needs before the next step.
        #[arg(
            long,
            default_value_t = flowgate_domain::rollouts::DEFAULT_MINIMUM_USERS,
            value_parser = clap::value_parser!(u64).range(1..=flowgate_domain::rollouts::MAX_MINIMUM_USERS)
        )]
        minimum_users: u64,
        /// A metric that must not get significantly worse (repeat for several; default
        /// `flow_complete`, `purchase_complete` and `revenue`).
        #[arg(long = "guardrail")]
        guardrails: Vec<String>,
        /// A guardrail (one of the rollout's) that does not hold a step while it has no
        /// estimate (D35; repeat for several); significantly worse, it still rolls back.
        #[arg(long = "optional-guardrail")]
        optional_guardrails: Vec<String>,
        /// With `catalog.require_review`: propose the rollout as this editor or admin (an
        /// email), for another to approve in the console (D35).
        #[arg(long, conflicts_with = "apply_now")]
        author: Option<String>,
        /// With `catalog.require_review`: start it at once without review (break-glass,
        /// audited as such).
        #[arg(long)]
        apply_now: bool,
        /// Why, for the audit log.
        #[arg(long, default_value = "")]
        comment: String,
        /// Print the rollout as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The rollouts, newest first.
    List {
        /// Only rollouts in this state (`running`, `paused`, `rolled_back`, `completed`).
        #[arg(long)]
        state: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One rollout: its steps, when each was applied and the guardrails' figures.
    Show {
        /// The rollout's id.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pause a running rollout: no step is taken; the new flow keeps its share.
    Pause {
        /// The rollout's id.
        id: String,
        /// Why, for the audit log.
        #[arg(long, default_value = "")]
        comment: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Resume a paused rollout.
    Resume {
        /// The rollout's id.
        id: String,
        /// Why, for the audit log.
        #[arg(long, default_value = "")]
        comment: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Roll a rollout back now: the rule serves the old flow to everyone.
    Rollback {
        /// The rollout's id.
        id: String,
        /// Why, for the audit log.
        #[arg(long, default_value = "")]
        comment: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `flowgate audit ...` (D28).
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The newest entries first.
    List {
        /// Only entries at or after this time (RFC 3339).
        #[arg(long)]
        since: Option<String>,
        /// Only entries of this actor (an email, `cli`, `admin-token`, `scheduler`).
        #[arg(long)]
        actor: Option<String>,
        /// Only entries of this action (`catalog.change`, `sign_in.failed`, ...).
        #[arg(long)]
        action: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100, value_parser = limit())]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Key environment argument.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum KeyEnv {
    /// `fg_live_...`
    Live,
    /// `fg_test_...`
    Test,
}

impl From<KeyEnv> for KeyEnvironment {
    fn from(e: KeyEnv) -> Self {
        match e {
            KeyEnv::Live => KeyEnvironment::Live,
            KeyEnv::Test => KeyEnvironment::Test,
        }
    }
}

/// Key type argument.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum KeyKind {
    /// Publishable SDK key.
    Sdk,
    /// Server-side dashboard key (rejected by this service's API).
    Secret,
    /// A store's notifications, e.g. RevenueCat's webhook (D30): valid on the store routes
    /// only.
    Webhook,
}

impl From<KeyKind> for KeyType {
    fn from(k: KeyKind) -> Self {
        match k {
            KeyKind::Sdk => KeyType::Sdk,
            KeyKind::Secret => KeyType::Secret,
            KeyKind::Webhook => KeyType::Webhook,
        }
    }
}

/// Exit codes (documented in docs/operations.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// Done.
    Success = 0,
    /// A runtime failure: store unreachable, I/O error, incomplete drain at shutdown.
    Failure = 1,
    /// Bad command-line usage (clap exits with it itself; listed so the table is complete).
    #[allow(dead_code)]
    Usage = 2,
    /// Invalid configuration.
    Config = 3,
    /// Invalid input: an import file with problems; an unknown experiment, app or parameter of
    /// `flowgate experiments` (D22).
    InvalidInput = 4,
    /// The named record does not exist (e.g. `keys revoke` of an unknown id or workspace,
    /// `catalog export --workspace` of an unknown workspace).
    NotFound = 5,
}
