-- Webhook keys (D30): workspace keys of type `webhook`, in a table of their own so that
-- release 0.2.0, which reads every row of `api_keys` and takes an unknown key type for corrupt
-- data, never meets one (D26). Same table as migrations/postgres, with the columns of
-- `api_keys` in SQLite's types. A key id is unique across both tables: the store checks the
-- other table in the transaction that inserts (SQLite has one writer at a time).
CREATE TABLE webhook_keys (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    workspace_id BLOB NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    digest BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    display_prefix TEXT NOT NULL,
    key_type TEXT NOT NULL CHECK (key_type = 'webhook'),
    environment TEXT NOT NULL CHECK (environment IN ('live', 'test')),
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
) STRICT;
CREATE INDEX webhook_keys_workspace_id ON webhook_keys (workspace_id, created_at);

-- The catalog snapshot reads this table: every change bumps the revision (D12).
CREATE TRIGGER webhook_keys_bump_revision_insert AFTER INSERT ON webhook_keys
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER webhook_keys_bump_revision_update AFTER UPDATE ON webhook_keys
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER webhook_keys_bump_revision_delete AFTER DELETE ON webhook_keys
BEGIN
    UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;
