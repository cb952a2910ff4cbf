//! `flowgate serve`: the composition root. [`serve`] reads top to bottom in the order the
//! service comes up, each step a function taking what the earlier ones built:
//!
//! 1. [`Adapters::open`]: every outside system (the store, the event bus, the sticky store, the
//!    results readers, the App Store roots), each built by its adapter's constructor from its
//!    own settings ([`crate::adapters`]);
//! 2. [`first_catalog`]: the catalog every request reads, loaded before anything listens;
//! 3. [`request_path`]: the analytics sink, sticky assignments and the API's state;
//! 4. [`Tasks::spawn`]: the catalog refresher, the rollout scheduler and the maintenance loops;
//! 5. [`admin`]: health, metrics, the admin API and the console (the last two only with
//!    `admin.token`);
//! 6. [`Listeners::start`]: the API and admin listeners;
//! 7. [`shutdown`], on SIGTERM or Ctrl-C: new event requests are refused (503), in-flight
//!    requests finish, the sink drains within `events.drain_deadline_ms`, and the exit code
//!    says whether everything accepted was stored.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::{Server, ServerHandle};
use actix_web::{web, HttpServer};
use arc_swap::ArcSwap;
use flowgate_analytics::Sink;
use flowgate_domain::ports::{
    CatalogSource, DeadLetterStore, EventStore, StickyStore, SystemClock,
};
use flowgate_domain::Catalog;
use flowgate_http::apple_jws::AppleRoots;
use flowgate_http::console::ConsoleAccess;
use flowgate_http::results::ResultsMetrics;
use flowgate_http::sticky::{run_writer, StickyAssignments, StickyHealth, StickyMetrics};
use flowgate_http::{
    admin_app, api_app, AdminState, ApiState, CatalogHandle, ConnectionLimits, ExplainAccess,
    HttpMetrics, ResultsAccess,
};
use flowgate_jetstream::{Bus, Publisher};
use flowgate_store::{Backend, ResultsReader, Store};
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cache::CatalogCache;
use crate::cli::ExitCode;
use crate::config::{Config, Environment, SinkKind};
use crate::demo;
use crate::health::{Admin, DeadLetterGauge, EventMaintenance, ServiceHealth};
use crate::refresh::{Refresher, ReloadError};
use crate::scrape::Collected;
use crate::terminal::errln;

/// Runs the service until a shutdown signal.
pub async fn serve(config: Config, env: Environment) -> ExitCode {
    match run(&config, env).await {
        Ok(code) | Err(code) => code,
    }
}

/// The steps of the module's doc, in order; `Err` is a start that stopped (the code says why).
async fn run(config: &Config, env: Environment) -> Result<ExitCode, ExitCode> {
    let adapters = Adapters::open(config).await?;
    let health = Arc::new(ServiceHealth::default());
    let (catalog, refresher) = first_catalog(config, &adapters.store, &health).await;
    let mut registry = Registry::default();
    crate::health::register_build_info(&mut registry);
    let request = request_path(config, &adapters, &catalog, &mut registry).await?;
    let tasks = Tasks::spawn(config, &adapters, refresher, &request, &mut registry);
    // For the start-up line, read once the listeners are up (the store may be slow to answer).
    let store = adapters.store.clone();
    // Reports and previews run on a runtime of their own at a lower priority, never on the
    // admin listener's worker (held until serve returns; shut down without waiting).
    let background = BackgroundRuntime::start().map_err(|e| {
        tracing::error!(error = %e, "cannot start the background runtime");
        ExitCode::Failure
    })?;
    let admin_state = admin(
        config,
        adapters,
        AdminParts {
            health,
            catalog,
            request: &request,
            tasks: &tasks,
            background: &background,
        },
        registry,
    );
    let listeners = Listeners::start(config, request.state.clone(), admin_state)?;
    tracing::info!(
        environment = env.as_str(),
        api = %listeners.api_addr,
        admin = %listeners.admin_addr,
        database = %config.database.redacted_url(),
        database_tls = %database_tls(&store).await,
        key_environment = %config.auth.key_environment,
        events_sink = config.events.sink.as_str(),
        events_ack = config.events.sink_settings.ack.as_str(),
        "flowgate is serving"
    );
    shutdown_signal().await;
    Ok(shutdown(config, request, tasks, listeners).await)
}

/// Step 1: every outside system the service talks to, each built by its adapter's constructor
/// from its own settings. Files the configuration names are read first: a wrong one stops the
/// start at once.
struct Adapters {
    /// The store: catalog, people, audit, dead letters, the events table (D16).
    store: Store,
    /// Where the sink writes (D16): the store, or the stream `flowgate ingest` reads.
    events: Arc<dyn EventStore>,
    /// The event bus, with `events.sink = "jetstream"`.
    bus: Option<Bus>,
    /// Where sticky experiments' assignments are kept (D23).
    sticky: Arc<dyn StickyStore>,
    /// The rollout scheduler's reader of results (D22, D29), on a pool of its own.
    scheduler_results: ResultsReader,
    /// The admin API's reader of results, on another pool; none without `admin.token`.
    admin_results: Option<ResultsReader>,
    /// The roots App Store notifications must chain to (D30).
    apple_roots: AppleRoots,
}

impl Adapters {
    async fn open(config: &Config) -> Result<Self, ExitCode> {
        let apple_roots = apple_roots(config)?;
        let store = crate::adapters::open_store(config).await?;
        let (events, bus): (Arc<dyn EventStore>, Option<Bus>) = match config.events.sink {
            SinkKind::Store => (Arc::new(store.clone()), None),
            SinkKind::Jetstream => {
                let bus = crate::adapters::bus(config, "flowgate-serve").await?;
                (Arc::new(Publisher::new(&bus)), Some(bus))
            }
        };
        let sticky = crate::adapters::sticky_store(config, &store).await?;
        let scheduler_results = crate::adapters::results_reader(config)?;
        let admin_results = if config.admin.token.is_empty() {
            None
        } else {
            Some(crate::adapters::results_reader(config)?)
        };
        Ok(Self {
            store,
            events,
            bus,
            sticky,
            scheduler_results,
            admin_results,
            apple_roots,
        })
    }
}

/// Step 2: the catalog every request reads (an empty one until the first load), and the
/// refresher that keeps it current from the store (run by step 4). An empty SQLite store gets
/// the demo first. A store that cannot be read is not fatal: the listeners start, the refresher
/// retries, and meanwhile the cached catalog serves (D20), or `/readyz` says `not_ready`.
async fn first_catalog(
    config: &Config,
    store: &Store,
    health: &Arc<ServiceHealth>,
) -> (CatalogHandle, Refresher) {
    if store.backend() == Backend::Sqlite {
        seed_demo_if_empty(store, config).await;
    }
    let catalog: CatalogHandle = Arc::new(ArcSwap::from_pointee(Catalog::empty()));
    let cache = (!config.catalog.cache_path.is_empty()).then(|| {
        Arc::new(CatalogCache::new(
            &config.catalog.cache_path,
            store.identity(),
        ))
    });
    let mut refresher = Refresher {
        source: Arc::new(store.clone()),
        catalog: catalog.clone(),
        health: health.clone(),
        known: None,
        cache,
    };
    match refresher.reload(None).await {
        Ok(_) => {}
        Err(e @ ReloadError::Load(_)) => {
            tracing::error!(error = %e, "the store is unreachable at start; retrying in the background");
            refresher.serve_cache().await;
        }
        Err(e) => {
            tracing::error!(error = %e, "the first catalog load failed; retrying in the background")
        }
    }
    (catalog, refresher)
}

/// Step 3's values: what answers `/v1` requests, and the tasks behind it.
struct RequestPath {
    /// The API's state, shared by its workers.
    state: web::Data<ApiState>,
    /// The analytics sink (D15, D16): events dead-letter into the store when refused for good
    /// (D17).
    sink: Arc<Sink>,
    /// Whether the sticky store answers (D23), for `/readyz`.
    sticky_health: Arc<StickyHealth>,
    /// Probes a failing sticky store until it answers.
    sticky_prober: JoinHandle<()>,
    /// Stores sticky assignments behind resolve.
    sticky_writer: JoinHandle<()>,
}

/// Step 3: the analytics sink, sticky assignments and the API's state.
async fn request_path(
    config: &Config,
    adapters: &Adapters,
    catalog: &CatalogHandle,
    registry: &mut Registry,
) -> Result<RequestPath, ExitCode> {
    let http = config.http().map_err(|e| {
        errln!("flowgate: {e}");
        ExitCode::Config
    })?;
    let sink = Sink::start(
        config.sink(),
        adapters.events.clone(),
        Arc::new(adapters.store.clone()) as Arc<dyn DeadLetterStore>,
    )
    .map_err(|e| {
        tracing::error!(error = %e, "the analytics sink did not start");
        ExitCode::Failure
    })?;
    let sink = Arc::new(sink);
    let metrics = HttpMetrics::new(registry);
    let (sticky, writer) = StickyAssignments::new(
        Arc::clone(&adapters.sticky),
        config.sticky.settings,
        StickyMetrics::new(registry),
    );
    let sticky_health = Arc::clone(sticky.health());
    check_sticky_store(&sticky, config).await;
    let sticky_prober = tokio::spawn({
        let sticky = sticky.clone();
        async move { sticky.probe_while_failing().await }
    });
    let state = ApiState::new(
        http,
        catalog.clone(),
        sink.clone(),
        Arc::new(SystemClock),
        metrics,
    )
    .with_sticky(sticky)
    .with_store_routes(flowgate_http::StoreRoutes {
        store: Arc::new(adapters.store.clone()),
        apple_roots: adapters.apple_roots.clone(),
    });
    Ok(RequestPath {
        state: web::Data::new(state),
        sink,
        sticky_health,
        sticky_prober,
        sticky_writer: tokio::spawn(run_writer(writer)),
    })
}

/// Step 4's values: the background loops, stopped by `stop` at shutdown.
struct Tasks {
    /// Turns true at shutdown: the refresher and the scheduler end.
    stop: watch::Sender<bool>,
    refresher: JoinHandle<()>,
    scheduler: JoinHandle<()>,
    /// Dead letters in the store, counted now and then.
    dead_letters: Arc<DeadLetterGauge>,
    /// The events table's retention and partitions.
    maintenance: Arc<EventMaintenance>,
}

impl Tasks {
    /// Step 4: the catalog refresher (D12), the rollout scheduler (D29: every replica runs it,
    /// the one holding the lease acts), the dead-letter gauge, the events table's maintenance
    /// and the console's.
    fn spawn(
        config: &Config,
        adapters: &Adapters,
        refresher: Refresher,
        request: &RequestPath,
        registry: &mut Registry,
    ) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let store = &adapters.store;
        let scheduler = tokio::spawn(crate::scheduler::run(
            store.clone(),
            Arc::new(adapters.scheduler_results.clone()),
            config.results_settings(),
            crate::scheduler::SchedulerSettings {
                interval: Duration::from_millis(config.scheduler.interval_ms),
                lease: Duration::from_secs(config.scheduler.lease_seconds),
                // Twice the catalog refresh, at least a second: every replica serves a step by
                // then, so its reading starts with users under its weights.
                settle: Duration::from_millis((2 * config.catalog.refresh_interval_ms).max(1000)),
            },
            crate::scheduler::SchedulerMetrics::new(registry),
            stop_rx.clone(),
        ));
        let refresher = tokio::spawn(refresher.run(
            Some(request.state.clone()),
            Duration::from_millis(config.catalog.refresh_interval_ms),
            stop_rx,
        ));
        let dead_letters = Arc::new(DeadLetterGauge::default());
        dead_letters.spawn_refresh(store.clone());
        let maintenance = Arc::new(EventMaintenance::default());
        maintenance.spawn(store.clone(), config.event_retention());
        tokio::spawn(console_maintenance(
            store.clone(),
            config.audit.retention_days,
        ));
        Self {
            stop,
            refresher,
            scheduler,
            dead_letters,
            maintenance,
        }
    }
}

/// What step 5 reads from the earlier steps besides the adapters.
struct AdminParts<'a> {
    health: Arc<ServiceHealth>,
    catalog: CatalogHandle,
    request: &'a RequestPath,
    tasks: &'a Tasks,
    background: &'a BackgroundRuntime,
}

/// Step 5: the admin listener's state: health and metrics always; the admin API (D18, D22)
/// and the console (D24) only with `admin.token`.
fn admin(
    config: &Config,
    adapters: Adapters,
    parts: AdminParts<'_>,
    mut registry: Registry,
) -> AdminState {
    let AdminParts {
        health,
        catalog,
        request,
        tasks,
        background,
    } = parts;
    let results_metrics = ResultsMetrics::new(&mut registry);
    let store = adapters.store;
    let admin = Arc::new(Admin {
        health,
        catalog: catalog.clone(),
        sink: request.sink.clone(),
        sink_kind: config.events.sink,
        ack: config.events.sink_settings.ack,
        bus: adapters.bus,
        dead_letters: tasks.dead_letters.clone(),
        maintenance: tasks.maintenance.clone(),
        store: store.clone(),
        sticky: request.sticky_health.clone(),
    });
    // The values read at scrape time (catalog, store, sink, dead letters, maintenance).
    registry.register_collector(Box::new(Collected(admin.clone())));
    let state = AdminState::new(Arc::new(registry), admin);
    let Some(reader) = adapters.admin_results else {
        return state;
    };
    let token = config.admin.token.clone();
    state
        .with_results(ResultsAccess {
            token: token.clone(),
            catalog: catalog.clone(),
            source: background.work().results(Arc::new(reader)),
            settings: config.results_settings(),
            metrics: results_metrics,
        })
        .with_explain(ExplainAccess {
            token,
            catalog,
            default_ttl: config.resolve.cache_ttl_seconds,
            body_limit: config.resolve.body_limit_bytes,
            body_pace: request.state.config().body_pace,
            sticky: Some(adapters.sticky),
        })
        .with_audit(Arc::new(store.clone()))
        .with_rollouts(Arc::new(store.clone()))
        .with_console(ConsoleAccess {
            backend: flowgate_control::console::Console::new(Arc::new(store.clone())),
            people: Arc::new(store.clone()),
            audit: Arc::new(store.clone()),
            changes: Arc::new(store),
            require_review: config.catalog.require_review,
            admin_token_sign_in: config.console.admin_token_sign_in,
            failed_sign_ins_per_account: config.console.failed_sign_ins_per_account,
            session_lifetime: Duration::from_secs(config.admin.console_session_seconds),
            background: background.work(),
            oidc: crate::console::oidc_access(&config.console.oidc),
        })
}

/// Step 6's values: the two running listeners.
struct Listeners {
    api: ServerHandle,
    admin: ServerHandle,
    api_task: JoinHandle<std::io::Result<()>>,
    admin_task: JoinHandle<std::io::Result<()>>,
    api_addr: SocketAddr,
    admin_addr: SocketAddr,
}

impl Listeners {
    /// Step 6: the API listener (with its connection limits, D25) and the admin listener (one
    /// worker).
    fn start(
        config: &Config,
        api_state: web::Data<ApiState>,
        admin_state: AdminState,
    ) -> Result<Self, ExitCode> {
        let (Ok(api_addr), Ok(admin_addr)) = (config.server_addr(), config.admin_addr()) else {
            return Err(ExitCode::Config);
        };
        let limits = ApiLimits {
            max_connections: connection_budget(config.server.max_connections),
            per_address: ConnectionLimits::new(
                config.server.max_connections_per_address,
                config.rate_limit.trusted_proxies.clone(),
                api_state.metrics().clone(),
            ),
        };
        let connections = Arc::clone(&limits.per_address);
        tokio::spawn(crate::heap::release_after_closed_connections(
            move || connections.closed(),
            crate::heap::CONNECTIONS_RELEASE_EVERY,
            crate::heap::CONNECTIONS_RELEASE_AT_LEAST,
            crate::heap::release_free_memory,
        ));
        let (api, _) =
            api_listener(api_state, api_addr, config.server.workers, limits).map_err(|e| {
                tracing::error!(address = %api_addr, error = %e, "cannot listen for the API");
                ExitCode::Failure
            })?;
        let admin = HttpServer::new(move || admin_app(admin_state.clone()))
            .workers(1)
            .disable_signals()
            // A client that closes its side has left: its request is dropped, so a console
            // password post waiting for its turn starts no hash (issue 65). No HTTP client of
            // an admin endpoint half-closes and then waits for the answer.
            .h1_allow_half_closed(false)
            .bind(admin_addr)
            .map_err(|e| {
                tracing::error!(address = %admin_addr, error = %e, "cannot listen for the admin endpoints");
                ExitCode::Failure
            })?
            .run();
        Ok(Self {
            api: api.handle(),
            admin: admin.handle(),
            api_task: tokio::spawn(api),
            admin_task: tokio::spawn(admin),
            api_addr,
            admin_addr,
        })
    }
}

/// Step 7: the sink refuses new events (requests get 503 overloaded, nothing accepted is
/// lost) while the API stops accepting connections and finishes the requests in flight; then
/// the background loops and the admin listener stop, and queued sticky assignments are stored.
/// Success when every accepted event was stored within `events.drain_deadline_ms`.
async fn shutdown(
    config: &Config,
    request: RequestPath,
    tasks: Tasks,
    listeners: Listeners,
) -> ExitCode {
    tracing::info!("shutdown: refusing new events, finishing requests, draining the event buffer");
    let RequestPath {
        state,
        sink,
        sticky_prober,
        sticky_writer,
        ..
    } = request;
    drop(state);
    let deadline = config.events.sink_settings.drain_deadline;
    let (report, ()) = tokio::join!(sink.shutdown(deadline), listeners.api.stop(true));
    let _ = tasks.stop.send(true);
    listeners.admin.stop(true).await;
    let _ = tokio::join!(
        listeners.api_task,
        listeners.admin_task,
        tasks.refresher,
        tasks.scheduler
    );
    // The prober holds the assignments too: gone with it, the writer sees no producer left.
    sticky_prober.abort();
    let _ = sticky_prober.await;
    // The API's state is gone with its workers: the writer stores what is queued, then ends.
    if tokio::time::timeout(STICKY_DRAIN, sticky_writer)
        .await
        .is_err()
    {
        tracing::warn!("shutdown: assignments still queued after {STICKY_DRAIN:?} are not stored");
    }
    if report.completed {
        tracing::info!(
            written = report.written,
            elapsed_ms = report.elapsed.as_millis() as u64,
            "shutdown complete: every accepted event is stored"
        );
        ExitCode::Success
    } else {
        tracing::error!(
            remaining = report.remaining,
            "shutdown deadline passed with events not stored: they are lost"
        );
        ExitCode::Failure
    }
}

/// How long shutdown waits for queued sticky assignments to be stored (D23).
const STICKY_DRAIN: Duration = Duration::from_secs(5);

/// What the API listener's connections may hold (D25).
pub(crate) struct ApiLimits {
    /// Open connections at most, over all workers.
    pub max_connections: usize,
    /// The cap per client address.
    pub per_address: Arc<ConnectionLimits>,
}

/// File descriptors kept for everything but API connections: the admin listener and its
/// clients, the store's pools and `COPY` clients, the bus, the log, the cache file.
const RESERVED_DESCRIPTORS: u64 = 256;

/// `wanted` connections, or fewer when the process's file limit (raised to its hard limit
/// first) would not leave [`RESERVED_DESCRIPTORS`] free beside them (D25): a process that
/// runs out of descriptors cannot answer its admin listener or reach its store.
fn connection_budget(wanted: usize) -> usize {
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read or raise the file limit; server.max_connections is used as set");
            return wanted;
        }
    };
    let room = usize::try_from(limit.saturating_sub(RESERVED_DESCRIPTORS)).unwrap_or(usize::MAX);
    // A limit too small to keep the reserve gets half of it for connections.
    let room = if limit <= 2 * RESERVED_DESCRIPTORS {
        usize::try_from(limit / 2).unwrap_or(usize::MAX)
    } else {
        room
    };
    if wanted > room {
        tracing::warn!(
            file_limit = limit,
            max_connections = room,
            configured = wanted,
            "server.max_connections lowered to fit under the file limit; raise the limit (LimitNOFILE, ulimit -n) to allow more"
        );
        room
    } else {
        wanted
    }
}

/// The runtime of the admin listener's heavy work ([`flowgate_http::background`]): one worker
/// thread and at most [`BACKGROUND_BLOCKING_THREADS`] blocking ones (SQLite's reads), each at
/// nice [`BACKGROUND_NICE`], so that when the API's workers and a report both want a core, the
/// API's get it (CFS gives a nice-10 thread about a tenth of a contended core).
struct BackgroundRuntime(Option<tokio::runtime::Runtime>);

/// Blocking threads of the background runtime.
const BACKGROUND_BLOCKING_THREADS: usize = 8;
/// The background threads' niceness (Linux schedules niceness per thread).
const BACKGROUND_NICE: libc::c_int = 10;

impl BackgroundRuntime {
    fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(BACKGROUND_BLOCKING_THREADS)
            .thread_name("flowgate-background")
            .on_thread_start(lower_thread_priority)
            .enable_all()
            .build()?;
        Ok(Self(Some(runtime)))
    }

    fn work(&self) -> flowgate_http::background::Background {
        match &self.0 {
            Some(runtime) => flowgate_http::background::Background::new(runtime.handle().clone()),
            None => flowgate_http::background::Background::current(),
        }
    }
}

/// Sets the calling thread's niceness to [`BACKGROUND_NICE`] (Linux schedules niceness per
/// thread); a failure leaves the default priority.
#[allow(unsafe_code)]
fn lower_thread_priority() {
    // SAFETY: gettid and setpriority take no pointers; on Linux PRIO_PROCESS with a thread id
    // sets that thread's niceness only.
    let failed = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE) != 0
    };
    if failed {
        tracing::debug!("a background thread keeps the default priority");
    }
}

impl Drop for BackgroundRuntime {
    fn drop(&mut self) {
        // Dropping a runtime inside another one's task would block: leave its work behind.
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Checks the sticky assignment store (D23) at start, within two seconds: one that cannot be
/// used is in the log with its URL redacted, and `/readyz` says `degraded` from the first
/// answer (`StickyAssignments::check_at_start`); the service serves on.
async fn check_sticky_store(sticky: &StickyAssignments, config: &Config) {
    let url = config.sticky.redis_url.trim();
    let shown = if url.is_empty() {
        config.database.redacted_url()
    } else {
        flowgate_redis::redact_url(url)
    };
    if let Err(error) = sticky.check_at_start(Duration::from_secs(2), &shown).await {
        tracing::error!(
            store = %shown,
            %error,
            "the sticky assignment store cannot be read: serving, with sticky experiments \
             resolved as without stored assignments until it answers"
        );
    }
}

/// The API listener on `addr` (`workers` 0: one per core), running once polled; the addresses
/// it listens on.
///
/// TCP_NODELAY: a compressed response leaves in several writes (chunked); with Nagle on, the
/// later ones wait for the client's delayed ACK, about 40 ms per request (P11 in
/// docs/decisions.md).
///
/// `limits.max_connections` is spread over the workers (actix counts per worker: one at its
/// cap stops accepting, and clients wait in the listen backlog); each accepted connection takes
/// a slot of its address first (`ConnectionLimits`).
fn api_listener(
    state: web::Data<ApiState>,
    addr: SocketAddr,
    workers: usize,
    limits: ApiLimits,
) -> std::io::Result<(Server, Vec<SocketAddr>)> {
    let workers = if workers > 0 {
        workers
    } else {
        std::thread::available_parallelism().map_or(1, usize::from)
    };
    let per_address = limits.per_address;
    let api = HttpServer::new(move || api_app(state.clone()))
        .disable_signals()
        .tcp_nodelay(true)
        .shutdown_timeout(5)
        .workers(workers)
        .max_connections(limits.max_connections.div_ceil(workers).max(1))
        .on_connect(move |io, extensions| per_address.on_connect(io, extensions));
    let api = api.bind(addr)?;
    let addrs = api.addrs();
    Ok((api.run(), addrs))
}

/// The database connection's TLS for the start-up line: the mode asked for and whether the
/// server took it up (with the default `sslmode=prefer` it may not have).
async fn database_tls(store: &Store) -> String {
    match (store.tls_mode(), store.uses_tls().await) {
        (None, _) => "none (SQLite file)".to_owned(),
        (Some(mode), Ok(true)) => format!("{mode}, encrypted"),
        (Some(mode), Ok(false)) => format!("{mode}, not encrypted"),
        (Some(mode), Err(_)) => format!("{mode}, not known yet"),
    }
}

async fn seed_demo_if_empty(store: &Store, config: &Config) {
    match store.load_catalog().await {
        Ok(data) if data.workspaces.is_empty() => {
            let base = base_url(&config.server.listen);
            match demo::create(store, config.auth.key_environment, &base).await {
                Ok(d) => crate::terminal::best_effort_lines(&d.banner()),
                Err(e) => tracing::error!(error = %e, "could not seed the demo workspace"),
            }
        }
        Ok(_) => {
            tracing::info!("the store holds a catalog; create a key with `flowgate keys create` or run `flowgate demo`");
        }
        Err(e) => tracing::warn!(error = %e, "could not check whether the store is empty"),
    }
}

/// The URL clients use for a listen address (`0.0.0.0` means this host).
pub fn base_url(listen: &str) -> String {
    let listen = listen
        .replace("0.0.0.0", "127.0.0.1")
        .replace("[::]", "[::1]");
    format!("http://{listen}")
}

/// SIGTERM (orchestrators) or SIGINT (Ctrl-C).
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The console's housekeeping (D28), every hour: expired sessions are deleted, and audit
/// entries older than `audit.retention_days` (0: none). Every replica runs it; the deletes
/// are idempotent.
async fn console_maintenance(store: Store, retention_days: u32) {
    use flowgate_domain::ports::{AuditLog as _, PeopleStore as _};
    let mut every = tokio::time::interval(Duration::from_secs(3600));
    loop {
        every.tick().await;
        let now = time::OffsetDateTime::now_utc();
        match store.delete_expired_sessions(now).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(sessions = n, "expired console sessions deleted"),
            Err(e) => tracing::warn!(error = %e, "expired console sessions could not be deleted"),
        }
        if retention_days > 0 {
            let cutoff = now - time::Duration::days(i64::from(retention_days));
            match store.delete_audit_before(cutoff).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    entries = n,
                    retention_days,
                    "audit entries past retention deleted"
                ),
                Err(e) => tracing::warn!(error = %e, "audit retention could not run"),
            }
        }
    }
}

/// The roots App Store signatures must chain to (D30): `stores.apple_root_certificates`, or
/// Apple's root built into the binary; a file that cannot be read or holds no certificate
/// stops the start, naming it. With `stores.demo_apple_signer` (development), the demo's test
/// root too, the signer created when missing.
fn apple_roots(config: &Config) -> Result<flowgate_http::apple_jws::AppleRoots, ExitCode> {
    let files = &config.stores.apple_root_certificates;
    let mut roots = if files.is_empty() {
        flowgate_http::apple_jws::AppleRoots::apple()
    } else {
        flowgate_http::apple_jws::AppleRoots::from_pem_files(files).map_err(|e| {
            errln!("flowgate: stores.apple_root_certificates: {e}");
            ExitCode::Config
        })?
    };
    let demo = &config.stores.demo_apple_signer;
    if !demo.as_os_str().is_empty() {
        let signer = crate::demo::apple_signer(demo, true).map_err(|e| {
            errln!("flowgate: stores.demo_apple_signer: {e}");
            ExitCode::Config
        })?;
        roots = roots.and(&signer.roots());
        tracing::warn!(
            signer = %demo.display(),
            root = ?signer.roots().fingerprints(),
            "App Store notifications signed by the demo's test root are trusted \
             (stores.demo_apple_signer, development only)"
        );
    }
    tracing::info!(roots = ?roots.fingerprints(), "App Store roots trusted");
    Ok(roots)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::{Read, Write};
    use std::net::{SocketAddrV4, TcpStream};

    use flowgate_domain::events::AnalyticsEvent;
    use flowgate_domain::ports::{Admission, BoxFuture, EventSink, Overloaded};
    use flowgate_http::HttpConfig;

    use super::*;

    struct NoEvents;

    impl EventSink for NoEvents {
        fn try_enqueue(&self, _: Vec<AnalyticsEvent>) -> Result<(), Overloaded> {
            Ok(())
        }
        fn admit(&self, _: usize) -> BoxFuture<'_, Result<Box<dyn Admission + '_>, Overloaded>> {
            Box::pin(async {
                Err(Overloaded {
                    retry_after_secs: 1,
                })
            })
        }
    }

    fn v4(addr: &libc::sockaddr_in) -> SocketAddrV4 {
        SocketAddrV4::new(
            u32::from_be(addr.sin_addr.s_addr).into(),
            u16::from_be(addr.sin_port),
        )
    }

    /// `TCP_NODELAY` of this process's socket that is connected from `peer` to `local`: the
    /// server's side of a connection the test opened, found among the open descriptors.
    #[allow(unsafe_code)]
    fn nodelay_of_accepted(local: SocketAddrV4, peer: SocketAddrV4) -> Option<bool> {
        for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
            let Ok(fd) = entry.unwrap().file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            // SAFETY: the calls only write into the local buffers whose sizes they are given;
            // a descriptor that is not an IPv4 socket (or was closed meanwhile) fails them.
            unsafe {
                let mut a: libc::sockaddr_in = std::mem::zeroed();
                let mut b: libc::sockaddr_in = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                if libc::getsockname(fd, (&raw mut a).cast(), &mut len) != 0
                    || a.sin_family != libc::AF_INET as libc::sa_family_t
                    || v4(&a) != local
                {
                    continue;
                }
                let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                if libc::getpeername(fd, (&raw mut b).cast(), &mut len) != 0 || v4(&b) != peer {
                    continue;
                }
                let mut on: libc::c_int = 0;
                let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                let got = libc::getsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    (&raw mut on).cast(),
                    &mut len,
                );
                assert_eq!(got, 0, "getsockopt(TCP_NODELAY)");
                return Some(on != 0);
            }
        }
        None
    }

    /// The API's connections are accepted with `TCP_NODELAY` (Nagle off): checked on the
    /// server's own socket of a real connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_api_listener_sets_tcp_nodelay() {
        let state = web::Data::new(ApiState::new(
            HttpConfig::default(),
            Arc::new(ArcSwap::from_pointee(Catalog::empty())),
            Arc::new(NoEvents),
            Arc::new(SystemClock),
            HttpMetrics::default(),
        ));
        let limits = ApiLimits {
            max_connections: 100,
            per_address: ConnectionLimits::new(10, Vec::new(), HttpMetrics::default()),
        };
        let (server, addrs) =
            api_listener(state, "127.0.0.1:0".parse().unwrap(), 1, limits).unwrap();
        let handle = server.handle();
        tokio::spawn(server);
        let SocketAddr::V4(local) = addrs[0] else {
            panic!("bound to IPv4")
        };
        let (client, peer) = tokio::task::spawn_blocking(move || {
            let mut client = TcpStream::connect(local).unwrap();
            client
                .write_all(b"GET /openapi.json HTTP/1.1\r\nHost: flowgate\r\n\r\n")
                .unwrap();
            // Answered: the connection was accepted (and is kept alive while we look).
            let mut head = [0u8; 12];
            client.read_exact(&mut head).unwrap();
            assert_eq!(&head, b"HTTP/1.1 200");
            let SocketAddr::V4(peer) = client.local_addr().unwrap() else {
                panic!("IPv4")
            };
            (client, peer)
        })
        .await
        .unwrap();
        assert_eq!(nodelay_of_accepted(local, peer), Some(true));
        drop(client);
        handle.stop(false).await;
    }
}
