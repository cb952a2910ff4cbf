-- Webhook keys (D30): workspace keys of type `webhook`, which a store's notifications carry
-- (RevenueCat's Authorization header). Hashed at rest and revocable like SDK keys (D1), with
-- the columns of `api_keys`; the catalog snapshot reads both tables and authenticates them
-- together. A table of their own, not rows of `api_keys`: release 0.2.0 reads every row of
-- `api_keys` and takes a key type it does not know for corrupt data, so one webhook key there
-- would stop a 0.2.0 replica running beside this release from loading its catalog (D26).
-- Expand only: 0.2.0 never reads this table.
--
-- A key id is unique across both tables (`flowgate keys revoke ID` finds it in either): the
-- store checks the other table in the transaction that inserts, serialised by an advisory
-- lock (crates/flowgate-store/src/keys.rs).
CREATE TABLE webhook_keys (
    id UUID PRIMARY KEY,
    workspace_id UUID NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    -- SHA-256 of the key (D1); the plaintext is never stored.
    digest BYTEA NOT NULL UNIQUE CHECK (length(digest) = 32),
    display_prefix TEXT NOT NULL,
    key_type TEXT NOT NULL CHECK (key_type = 'webhook'),
    environment TEXT NOT NULL CHECK (environment IN ('live', 'test')),
    name TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);
CREATE INDEX webhook_keys_workspace_id ON webhook_keys (workspace_id, created_at);

-- The snapshot reads this table: every change bumps the catalog revision and notifies the
-- replicas (D12), as for `api_keys`.
CREATE TRIGGER webhook_keys_bump_revision AFTER INSERT OR UPDATE OR DELETE ON webhook_keys
    FOR EACH ROW EXECUTE FUNCTION flowgate_bump_catalog_revision();
CREATE TRIGGER webhook_keys_bump_revision_truncate AFTER TRUNCATE ON webhook_keys
    FOR EACH STATEMENT EXECUTE FUNCTION flowgate_bump_catalog_revision();
