-- flowgate schema, SQLite: the catalog (D2), API keys (D1), analytics events (D7, D8) and the
-- catalog revision polled for change detection (D12). Same tables and columns as
-- migrations/postgres, in SQLite's types: UUIDs are 16-byte BLOBs, timestamps are UTC RFC 3339
-- TEXT with six fractional digits (so text order is time order), JSON is TEXT. STRICT tables
-- make SQLite enforce the column types. Foreign keys need `PRAGMA foreign_keys = ON`, which the
-- store sets on every connection.

-- One row, bumped by triggers whenever anything the catalog snapshot reads changes (D12).
CREATE TABLE catalog_revision (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL CHECK (revision >= 1)
) STRICT;
INSERT INTO catalog_revision (id, revision) VALUES (1, 1);

CREATE TABLE workspaces (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    name TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now'))
) STRICT;

CREATE TABLE apps (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    workspace_id BLOB NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    media_base_url TEXT NOT NULL,
    icon_base_url TEXT NOT NULL,
    cache_ttl_seconds INTEGER CHECK (cache_ttl_seconds >= 0),
    saved_groups TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now'))
) STRICT;
CREATE INDEX apps_workspace_id ON apps (workspace_id);

CREATE TABLE flows (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    app_id BLOB NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    published_version INTEGER CHECK (published_version >= 1),
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')),
    -- Deferred: a writer may point a flow at a version it inserts later in the transaction.
    FOREIGN KEY (id, published_version) REFERENCES flow_versions (flow_id, version)
        DEFERRABLE INITIALLY DEFERRED
) STRICT;
CREATE INDEX flows_app_id ON flows (app_id);

CREATE TABLE flow_versions (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    flow_id BLOB NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
    version INTEGER NOT NULL CHECK (version >= 1),
    schema_version INTEGER NOT NULL CHECK (schema_version >= 1),
    -- The exact JSON text as published (D2), never re-encoded.
    flow_schema TEXT NOT NULL,
    fonts TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')),
    UNIQUE (flow_id, version)
) STRICT;

CREATE TABLE placements (
    id INTEGER PRIMARY KEY,
    app_id BLOB NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    default_flow_id BLOB REFERENCES flows (id) ON DELETE SET NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')),
    UNIQUE (app_id, key)
) STRICT;

CREATE TABLE experiments (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    app_id BLOB NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'paused', 'draft', 'concluded')),
    seed TEXT,
    coverage REAL CHECK (coverage >= 0 AND coverage <= 1),
    namespace_id TEXT,
    namespace_start REAL,
    namespace_end REAL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')),
    CHECK ((namespace_id IS NULL) = (namespace_start IS NULL)
       AND (namespace_id IS NULL) = (namespace_end IS NULL))
) STRICT;
CREATE INDEX experiments_app_id ON experiments (app_id);

CREATE TABLE variants (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    experiment_id BLOB NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    position INTEGER NOT NULL CHECK (position >= 0),
    name TEXT NOT NULL,
    weight REAL NOT NULL CHECK (weight >= 0),
    flow_id BLOB REFERENCES flows (id),
    UNIQUE (experiment_id, position)
) STRICT;

CREATE TABLE rules (
    placement_id INTEGER NOT NULL REFERENCES placements (id) ON DELETE CASCADE,
    position INTEGER NOT NULL CHECK (position >= 0),
    audience TEXT,
    flow_id BLOB REFERENCES flows (id),
    experiment_id BLOB REFERENCES experiments (id),
    PRIMARY KEY (placement_id, position),
    CHECK ((flow_id IS NULL) <> (experiment_id IS NULL))
) STRICT;
CREATE INDEX rules_experiment_id ON rules (experiment_id);

CREATE TABLE api_keys (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    workspace_id BLOB NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    digest BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    display_prefix TEXT NOT NULL,
    key_type TEXT NOT NULL CHECK (key_type IN ('sdk', 'secret')),
    environment TEXT NOT NULL CHECK (environment IN ('live', 'test')),
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
) STRICT;
CREATE INDEX api_keys_workspace_id ON api_keys (workspace_id, created_at);

-- No foreign keys: an accepted event must be storable even after its app is deleted (D7).
CREATE TABLE analytics_events (
    event_id BLOB PRIMARY KEY CHECK (length(event_id) = 16),
    source TEXT NOT NULL,
    event_type TEXT NOT NULL,
    app_id BLOB NOT NULL,
    flow_id BLOB,
    flow_version_id BLOB,
    placement_key TEXT,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    device_platform TEXT NOT NULL,
    occurred_at TEXT NOT NULL,
    received_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')),
    sdk_version TEXT,
    experiment_id TEXT,
    variant_id TEXT,
    variant_name TEXT,
    reason TEXT,
    payload TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX analytics_events_app_occurred ON analytics_events (app_id, occurred_at);

-- Every change to a table the catalog snapshot reads bumps the revision (D12). SQLite has only
-- row-level triggers: a transaction may bump it several times, which only matters in that it
-- changes.
CREATE TRIGGER workspaces_bump_revision_insert AFTER INSERT ON workspaces
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER workspaces_bump_revision_update AFTER UPDATE ON workspaces
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER workspaces_bump_revision_delete AFTER DELETE ON workspaces
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER apps_bump_revision_insert AFTER INSERT ON apps
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER apps_bump_revision_update AFTER UPDATE ON apps
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER apps_bump_revision_delete AFTER DELETE ON apps
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER flows_bump_revision_insert AFTER INSERT ON flows
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER flows_bump_revision_update AFTER UPDATE ON flows
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER flows_bump_revision_delete AFTER DELETE ON flows
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER flow_versions_bump_revision_insert AFTER INSERT ON flow_versions
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER flow_versions_bump_revision_update AFTER UPDATE ON flow_versions
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER flow_versions_bump_revision_delete AFTER DELETE ON flow_versions
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER placements_bump_revision_insert AFTER INSERT ON placements
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER placements_bump_revision_update AFTER UPDATE ON placements
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER placements_bump_revision_delete AFTER DELETE ON placements
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER experiments_bump_revision_insert AFTER INSERT ON experiments
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER experiments_bump_revision_update AFTER UPDATE ON experiments
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER experiments_bump_revision_delete AFTER DELETE ON experiments
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER variants_bump_revision_insert AFTER INSERT ON variants
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER variants_bump_revision_update AFTER UPDATE ON variants
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER variants_bump_revision_delete AFTER DELETE ON variants
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER rules_bump_revision_insert AFTER INSERT ON rules
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER rules_bump_revision_update AFTER UPDATE ON rules
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER rules_bump_revision_delete AFTER DELETE ON rules
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER api_keys_bump_revision_insert AFTER INSERT ON api_keys
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER api_keys_bump_revision_update AFTER UPDATE ON api_keys
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER api_keys_bump_revision_delete AFTER DELETE ON api_keys
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;
