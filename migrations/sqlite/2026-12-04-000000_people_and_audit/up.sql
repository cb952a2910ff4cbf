-- People, console sessions, sign-in links, the audit log and proposed catalog changes (D28):
-- see migrations/postgres for what each holds. Times are RFC 3339 UTC text with six
-- fractional digits, booleans INTEGER 0 or 1, UUIDs 16-byte BLOBs, as in the other tables.
CREATE TABLE people (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    email TEXT NOT NULL UNIQUE CHECK (email <> ''),
    role TEXT NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    password_hash TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE sign_in_links (
    token_hash TEXT PRIMARY KEY,
    person_id BLOB NOT NULL REFERENCES people (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
) STRICT;
CREATE INDEX sign_in_links_expires_at ON sign_in_links (expires_at);

CREATE TABLE console_sessions (
    id_hash TEXT PRIMARY KEY,
    format INTEGER NOT NULL CHECK (format >= 1),
    person_id BLOB REFERENCES people (id) ON DELETE CASCADE,
    actor TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    csrf TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    address TEXT
) STRICT;
CREATE INDEX console_sessions_person_id ON console_sessions (person_id);
CREATE INDEX console_sessions_expires_at ON console_sessions (expires_at);

CREATE TABLE console_secret (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    secret BLOB NOT NULL CHECK (length(secret) = 32),
    created_at TEXT NOT NULL
) STRICT;

-- AUTOINCREMENT: an id is never used twice, even after retention deleted the newest entries.
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    format INTEGER NOT NULL CHECK (format >= 1),
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    comment TEXT,
    revision_before INTEGER CHECK (revision_before >= 0),
    revision_after INTEGER CHECK (revision_after >= 0),
    detail TEXT NOT NULL
) STRICT;
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_action_target ON audit_log (action, target, at);

CREATE TABLE catalog_changes (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    format INTEGER NOT NULL CHECK (format >= 1),
    author TEXT NOT NULL,
    created_at TEXT NOT NULL,
    base_revision INTEGER NOT NULL CHECK (base_revision >= 0),
    change TEXT NOT NULL,
    summary TEXT NOT NULL,
    comment TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'withdrawn', 'failed')),
    decided_by TEXT,
    decided_at TEXT,
    applied_revision INTEGER CHECK (applied_revision >= 0),
    note TEXT
) STRICT;
CREATE INDEX catalog_changes_created_at ON catalog_changes (created_at, id);
CREATE INDEX catalog_changes_state ON catalog_changes (state, created_at, id);
