# flowgate: developer entry points. `make run` serves on the embedded default, `make test`
# runs every test. CI (`.ci/run`) calls `make ci`.
SHELL := /bin/bash
CARGO ?= cargo
DOMAIN_CRATE := flowgate-domain
# Crates the domain must never depend on (architecture invariant, docs/architecture.md).
FORBIDDEN_IN_DOMAIN := tokio actix-web actix-rt diesel diesel-async
# The previous release's commit (CHANGELOG.md), the domain's public API is checked against.
SEMVER_BASELINE := ca0e718141179f75923b99d2cb51a9fef6967cae
SEMVER_CHECKS_VERSION := 0.51.0

.PHONY: release-pgo run test upgrade-test lint fmt doc openapi bench bench-domain bench-handler bench-instructions bench-count bench-stages bench-store bench-results bench-console bench-admin bench-http bench-http-unpinned bench-sticky bench-peer ci check-domain-deps check-module-cycles check-docs check-semver pg-up nats-up redis-up browser-up

## Serve on the embedded default: SQLite under ./data, migrations applied, a demo workspace
## seeded into an empty store, a key and curl commands printed.
run:
	$(CARGO) run -p flowgate -- serve

## Every test of the workspace; the conformance counts are printed (see .config/nextest.toml).
## Then a Python client generated from docs/openapi.json against the real server
## (reliability/api-client.sh; openapi-python-client from PyPI into target/api-client).
test: pg-up nats-up redis-up browser-up
	$(CARGO) nextest run --workspace --no-fail-fast
	$(CARGO) test --workspace --doc
	$(CARGO) run -q -p $(DOMAIN_CRATE) --example embed >/dev/null
	$(CARGO) run -q -p flowgate-http --example engine_service -- --check
	bash reliability/api-client.sh

## Start PostgreSQL when it is not running (the store adapters' tests need it).
pg-up:
	@if command -v pg_isready >/dev/null && ! pg_isready -h 127.0.0.1 -p 5432 -q; then \
		echo "starting PostgreSQL"; \
		pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start || true; \
		for i in $$(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done; \
	fi

## NATS with JetStream on 127.0.0.1:4222 when it is not running (the event bus, D16), and the
## nats-server binary the bus tests start their own servers with (Debian's package when
## missing).
NATS_DIR ?= /var/lib/nats-server
nats-up:
	@if ! command -v nats-server >/dev/null && [ ! -x /usr/sbin/nats-server ]; then \
		echo "installing nats-server"; \
		apt-get install -y -qq nats-server >/dev/null || (apt-get update -qq && apt-get install -y -qq nats-server); \
	fi
	@if ! (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then \
		echo "starting nats-server with JetStream"; \
		mkdir -p $(NATS_DIR); \
		start-stop-daemon --start --oknodo --background --exec $$(command -v nats-server || echo /usr/sbin/nats-server) -- -a 127.0.0.1 -p 4222 -js -sd $(NATS_DIR); \
		for i in $$(seq 1 30); do (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null && break; sleep 0.2; done; \
	fi

## Redis on 127.0.0.1:6379 when it is not running (the sticky store's tests, D23; no
## persistence), and the redis-server binary its restart test starts its own servers with
## (Debian's package when missing).
redis-up:
	@if ! command -v redis-server >/dev/null; then \
		echo "installing redis-server"; \
		apt-get install -y -qq redis-server >/dev/null || (apt-get update -qq && apt-get install -y -qq redis-server); \
	fi
	@if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then \
		echo "starting redis-server"; \
		redis-server --port 6379 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes >/dev/null; \
		for i in $$(seq 1 30); do (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && break; sleep 0.2; done; \
	fi

## Chromium and its WebDriver for the console's browser tests (D24,
## crates/flowgate/tests/it/browser.rs): Debian's `chromium` and `chromium-driver` when either
## is missing.
browser-up:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		echo "installing chromium and chromium-driver"; \
		apt-get install -y -qq chromium chromium-driver >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver); \
	fi

## The domain crate is a library others embed: it must package and build as crates.io would
## (`cargo publish --dry-run`; the working tree may be dirty).
lint: check-domain-deps check-module-cycles check-docs check-semver
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	# The domain as an embedder compiles it: default features, without `server` (D31).
	$(CARGO) clippy -p $(DOMAIN_CRATE) --lib -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps
	$(CARGO) publish --dry-run --allow-dirty -p $(DOMAIN_CRATE)

## The domain crate depends on no runtime, web framework or ORM (architecture invariant). The
## check lists every normal and build dependency of the domain with the server's parts
## (`--features server`) and fails on a forbidden name; it also counts what an embedder
## compiles (default features).
check-domain-deps:
	@deps=$$($(CARGO) tree -p $(DOMAIN_CRATE) --features server -e normal,build --prefix none --format '{p}' | awk '{print $$1}' | sort -u) || exit 1; \
	embedder=$$($(CARGO) tree -p $(DOMAIN_CRATE) -e normal --prefix none --format '{p}' | awk '{print $$1}' | sort -u | wc -l) || exit 1; \
	bad=""; for dep in $(FORBIDDEN_IN_DOMAIN); do \
		if grep -qx "$$dep" <<<"$$deps"; then bad="$$bad $$dep"; fi; \
	done; \
	if [ -n "$$bad" ]; then \
		echo "architecture violation: $(DOMAIN_CRATE) depends on:$$bad"; \
		for dep in $$bad; do $(CARGO) tree -p $(DOMAIN_CRATE) --features server -e normal,build -i $$dep; done; exit 1; \
	fi; \
	echo "domain dependency check: $(DOMAIN_CRATE) has $$(wc -l <<<"$$deps") dependencies with server, $$embedder for an embedder, none of [$(FORBIDDEN_IN_DOMAIN)]"

## The domain's public API against the previous release (D26, D31): a breaking change fails
## unless Cargo.toml's version is the next major one (for 0.x, the next minor), and the
## CHANGELOG names it. Installs cargo-semver-checks when missing (about 10 minutes of build).
check-semver:
	@cargo semver-checks --version 2>/dev/null | grep -q "$(SEMVER_CHECKS_VERSION)" || \
		$(CARGO) install cargo-semver-checks --locked --version $(SEMVER_CHECKS_VERSION)
	$(CARGO) semver-checks -p $(DOMAIN_CRATE) --baseline-rev $(SEMVER_BASELINE)
	# An embedder's API: the default features only (the server's parts left out).
	$(CARGO) semver-checks -p $(DOMAIN_CRATE) --baseline-rev $(SEMVER_BASELINE) --default-features

## No crate's top-level modules depend on each other in a circle (D31, issue 55).
check-module-cycles:
	python3 reliability/module_cycles.py --self-test
	python3 reliability/module_cycles.py
	python3 reliability/long_functions.py --self-test
	python3 reliability/long_functions.py

## Every relative link, anchor and quoted path of the Markdown exists, offline (issue 55).
check-docs:
	python3 reliability/doc_links.py --self-test
	python3 reliability/doc_links.py

## Regenerate docs/openapi.json from the code (commit the result).
openapi:
	UPDATE_OPENAPI=1 $(CARGO) nextest run -p flowgate-http -E 'test(committed_document_matches_the_code)'

fmt:
	$(CARGO) fmt --all

doc:
	$(CARGO) doc --workspace --no-deps

## Criterion benchmarks of the domain (resolve, condition, bucketing).
bench-domain:
	$(CARGO) bench -p $(DOMAIN_CRATE) --bench domain

## In-process benchmark of the API's request path: single resolve and batches of 10 and 50
## through api_app, each beside a no-logic service answering the same bytes; their difference
## is flowgate's work per request.
bench-handler:
	$(CARGO) bench -p flowgate-http --bench handler

## Instructions and simulated L1i misses per request (and per placement for the batches) of
## Instructions per request of whole server processes, counted by callgrind (bench/count.py;
## docs/benchmarks.md's headline): flowgate (one worker, PostgreSQL and Redis), the no-logic
## baseline answering its bytes, Unleash Edge on the equivalent toggle (bench/peer/install_edge.sh
## builds it when missing, about 10 minutes once). Two runs; about 15 minutes once built.
bench-count: pg-up redis-up
	bash -c '. bench/install.sh && install_missing valgrind'
	$(CARGO) build --release -p flowgate -p flowgate-bench-baseline
	EDGE_BIN=$$(bash bench/peer/install_edge.sh) python3 bench/count.py

## the same in-process path, counted by callgrind: repeatable on this shared machine where times are not (bench/instructions.sh;
## installs valgrind).
bench-instructions:
	bash bench/instructions.sh

## Where a single resolve's instructions go, stage by stage (key, limits, body, resolve,
## rendering, events, dispatch), against the no-logic baseline (bench/stages.py, callgrind);
## after `BENCH_PERF=1 make bench-http`, the same stages in CPU µs on the pinned core.
bench-stages:
	STAGES=1 bash bench/instructions.sh

## Event insert throughput on PostgreSQL and SQLite beside raw COPY through psql, and the import,
## load and build times of a catalog of 100 apps / 5,000 placements / 2,000 versions of 20 KB
## (needs PostgreSQL).
bench-store: pg-up
	$(CARGO) bench -p flowgate-store --bench events
	$(CARGO) bench -p flowgate-store --bench catalog

## Experiment results at scale (D22): one experiment of 1,000,000 users and about 8.5 million
## events on PostgreSQL (RESULTS_USERS=N to change; RESULTS_BACKENDS=postgres,sqlite adds SQLite
## with a tenth of them; RESULTS_KEEP=1 keeps the loaded database for the next run;
## RESULTS_COLD=1 restarts PostgreSQL and drops the page cache first, as root).
bench-results: pg-up
	$(CARGO) bench -p flowgate-store --bench results

## The console's experiment page for the 1,000,000-user experiment of bench-results (D24,
## bench/console_page.py): loads that experiment into PostgreSQL and keeps it (RESULTS_KEEP=1),
## builds the release binary, then times the page against the admin API's JSON report.
bench-console: pg-up
	RESULTS_KEEP=1 $(CARGO) bench -p flowgate-store --bench results
	$(CARGO) build --release -p flowgate
	python3 bench/console_page.py

## The admin listener's work beside the API (issue 49): public resolve p99 at 100/s alone and
## with 32 report clients, the slowest /readyz meanwhile (bench/admin_isolation.py); 12 console
## previews of a 7.6 MiB catalog at once, the server's peak memory (bench/console_preview_rss.py).
## SQLite, the release binary (BENCH_BIN to compare another).
bench-admin:
	$(CARGO) build --release -p flowgate
	python3 bench/admin_isolation.py
	python3 bench/console_preview_rss.py

## Pinned HTTP benchmark of single resolve (bench/pinned.py): release build; flowgate and the
## no-logic baseline with one worker each pinned to CPU 0 (BENCH_SERVER_CPUS=0-3 on a bigger
## machine: that many workers on those cores), wrk and oha pinned to the other cores. Peak
## requests/s per server core in alternating closed-loop rounds, then open-loop latency (oha -q
## with --latency-correction) at 25/50/75% of the peak: p50, p99, p99.9 against the baseline's;
## then batches of 10 and 50 placements, CPU per placement against a baseline answering their
## bytes. Installs wrk and oha (pinned version, into target/bench-tools) when missing. About 9
## minutes once built.
bench-http: pg-up
	bash bench/run.sh

## The unpinned HTTP load benchmark of every scenario (bench/bench.py): wrk at 64 connections
## and the server's 2 workers sharing the machine; single resolve, batch 10/50, events with
## ack=stored and ack=buffered vs raw COPY, events through NATS JetStream, start-up, RSS, time
## for a published change to be served. About 8 minutes once built.
bench-http-unpinned: pg-up
	BENCH_PINNED=0 bash bench/run.sh

## Sticky assignment (D23), pinned as bench-http: new users at the peak (writes behind resolve),
## then known users' CPU per request and latency on the SQL store and on Redis against the same
## placement without sticky assignment (bench/sticky.py). About 6 minutes once built.
bench-sticky: pg-up redis-up
	BENCH_STICKY=1 bash bench/run.sh

## Unleash Edge (a pinned version from crates.io, built once into target/peer: about 10 minutes
## the first time) beside flowgate on the same pinned core, in alternating rounds: an
## equivalent toggle (identity and gzip) and Edge's own 5-feature data set (bench/peer.py).
## About 10 minutes once built. Not part of make test or CI.
bench-peer: pg-up
	bash bench/peer/run.sh

## Profile-guided release build of the service (and of the benchmark's baseline): instrumented
## build, training on the load benchmark's scenarios, optimized build into target/pgo/release/
## (bench/pgo.sh; needs PostgreSQL and wrk like bench-http; about 12 minutes): about 5% less
## CPU per single resolve than the plain release build (P23 in docs/decisions.md;
## docs/benchmarks.md).
release-pgo: pg-up
	bash bench/pgo.sh

## Every benchmark; the HTTP table comes last.
bench: bench-domain bench-handler bench-instructions bench-store bench-http bench-http-unpinned bench-sticky

ci: lint test upgrade-test

## The upgrade test (D26): the previous release (UPGRADE_FROM, its commit as CHANGELOG.md names
## it), built in a git worktree with this target directory, and this checkout's binary, side by
## side on one PostgreSQL database and one NATS JetStream server (reliability/upgrade.sh):
## migrated under the old one, each ingesting the other's messages, the old dead letters and
## cache file read by the new one, rolled back; every accepted event stored exactly once.
# 0.1.0: the oldest release this one upgrades from directly (0.2.0 wrote the same formats).
UPGRADE_FROM ?= 509660abafb57afe45555370045c2333a401686e
upgrade-test: pg-up nats-up
	bash reliability/upgrade.sh $(UPGRADE_FROM)

## Validate deploy/ (YAML, Kubernetes and compose schemas, the kustomizations built,
## systemd-analyze, hadolint, the alert rules with `promtool check rules` and their unit tests
## with `promtool test rules`, the Grafana dashboard, metric names against the code) without a
## container engine. Not part of `test`/`ci`: its first run installs tools from PyPI into
## target/deploy-venv, and promtool from Debian's `prometheus` package when none is on PATH
## (later runs are offline, about 3 s). With CI=true a missing promtool fails the check.
.PHONY: deploy-check
deploy-check:
	bash deploy/validate.sh

## Robustness (docs/reliability.md). Not part of `test`/`ci`: each takes minutes.
## fuzz: every cargo-fuzz target in fuzz/ for FUZZ_SECONDS (default 60) each; installs
## cargo-fuzz when missing and runs it on stable with RUSTC_BOOTSTRAP=1.
## api-fuzz: schemathesis (PyPI, into target/api-fuzz-venv) with every check, positive and
## negative data included, against a live debug server and its own /openapi.json, over a
## workspace imported for the run (reliability/api-fuzz-catalog.json) whose app ids and
## placement keys the generated requests use; API_FUZZ_MAX_EXAMPLES, API_FUZZ_SEED.
## soak: SOAK_SECONDS (default 600) of mixed load on a release build over a throwaway
## PostgreSQL database; CSV and summary in target/soak/.
.PHONY: fuzz api-fuzz soak
FUZZ_SECONDS ?= 60
SOAK_SECONDS ?= 600
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash reliability/fuzz.sh

api-fuzz:
	bash reliability/api-fuzz.sh

soak: pg-up
	SOAK_SECONDS=$(SOAK_SECONDS) bash reliability/soak.sh
