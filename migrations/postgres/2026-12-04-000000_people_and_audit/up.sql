-- People, console sessions, sign-in links, the audit log and proposed catalog changes (D28).
-- Expand only: new tables that release 0.2.0 never reads. The catalog snapshot reads none of
-- them, so no trigger bumps the catalog revision for them. Every replica reads the same rows:
-- any replica serves any session, and a restart signs nobody out.

-- Console users. `email` is stored as flowgate_domain::people::normalize_email gives it
-- (trimmed, lower-case), so the unique constraint is case-insensitive in effect.
CREATE TABLE people (
    id UUID PRIMARY KEY,
    email TEXT NOT NULL UNIQUE CHECK (email <> ''),
    role TEXT NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    disabled BOOLEAN NOT NULL DEFAULT false,
    -- The password's PHC string (argon2id); NULL until set.
    password_hash TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- One-time sign-in links: the SHA-256 (hex) of the secret the link carries, never the secret.
-- A link is deleted when taken.
CREATE TABLE sign_in_links (
    token_hash TEXT PRIMARY KEY,
    person_id UUID NOT NULL REFERENCES people (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX sign_in_links_expires_at ON sign_in_links (expires_at);

-- Console sessions by the SHA-256 (hex) of the cookie value, never the value. `person_id`
-- NULL: the admin token's break-glass session. `format`: the row's version (D26; see
-- crates/flowgate-domain/src/people.rs).
CREATE TABLE console_sessions (
    id_hash TEXT PRIMARY KEY,
    format INTEGER NOT NULL CHECK (format >= 1),
    person_id UUID REFERENCES people (id) ON DELETE CASCADE,
    actor TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    csrf TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    address TEXT
);
CREATE INDEX console_sessions_person_id ON console_sessions (person_id);
CREATE INDEX console_sessions_expires_at ON console_sessions (expires_at);

-- The key the console signs its sign-in forms with: one row, written by the first replica
-- that needs it and read by every other.
CREATE TABLE console_secret (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    secret BYTEA NOT NULL CHECK (length(secret) = 32),
    created_at TIMESTAMPTZ NOT NULL
);

-- The audit log: who did what, when. Ids increase in the order entries were appended (paging
-- goes by id). `detail` is JSON text of version `format` (D26). Nothing deletes rows but
-- retention, which goes by `at`. `action` has no CHECK: a later release may add actions.
CREATE TABLE audit_log (
    id BIGSERIAL PRIMARY KEY,
    format INTEGER NOT NULL CHECK (format >= 1),
    at TIMESTAMPTZ NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    comment TEXT,
    revision_before BIGINT CHECK (revision_before >= 0),
    revision_after BIGINT CHECK (revision_after >= 0),
    detail TEXT NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);
-- count_audit: failed sign-ins of one account since a time.
CREATE INDEX audit_log_action_target ON audit_log (action, target, at);

-- Proposed catalog changes. `change` is the change's own versioned JSON (the catalog's change
-- module reads it); `format` is the row's version (D26).
CREATE TABLE catalog_changes (
    id UUID PRIMARY KEY,
    format INTEGER NOT NULL CHECK (format >= 1),
    author TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    base_revision BIGINT NOT NULL CHECK (base_revision >= 0),
    change TEXT NOT NULL,
    summary TEXT NOT NULL,
    comment TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'withdrawn', 'failed')),
    decided_by TEXT,
    decided_at TIMESTAMPTZ,
    applied_revision BIGINT CHECK (applied_revision >= 0),
    -- Why applying it failed.
    note TEXT
);
CREATE INDEX catalog_changes_created_at ON catalog_changes (created_at, id);
CREATE INDEX catalog_changes_state ON catalog_changes (state, created_at, id);
