-- A reviewer may reject a pending change (D35): see migrations/postgres. Expand only.
-- SQLite cannot change a CHECK in place: the table is rebuilt (no other table refers to it).
CREATE TABLE catalog_changes_rebuilt (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    format INTEGER NOT NULL CHECK (format >= 1),
    author TEXT NOT NULL,
    created_at TEXT NOT NULL,
    base_revision INTEGER NOT NULL CHECK (base_revision >= 0),
    change TEXT NOT NULL,
    summary TEXT NOT NULL,
    comment TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'withdrawn', 'failed', 'rejected')),
    decided_by TEXT,
    decided_at TEXT,
    applied_revision INTEGER CHECK (applied_revision >= 0),
    note TEXT,
    apply_at TEXT
) STRICT;
INSERT INTO catalog_changes_rebuilt (id, format, author, created_at, base_revision, change,
    summary, comment, state, decided_by, decided_at, applied_revision, note, apply_at)
SELECT id, format, author, created_at, base_revision, change, summary, comment, state,
    decided_by, decided_at, applied_revision, note, apply_at
FROM catalog_changes;
-- contract: no release before this one has catalog changes; SQLite widens a CHECK only by a rebuild.
DROP TABLE catalog_changes;
-- contract: no release before this one has catalog changes; SQLite widens a CHECK only by a rebuild.
ALTER TABLE catalog_changes_rebuilt RENAME TO catalog_changes;
CREATE INDEX catalog_changes_created_at ON catalog_changes (created_at, id);
CREATE INDEX catalog_changes_state ON catalog_changes (state, created_at, id);
CREATE INDEX catalog_changes_due ON catalog_changes (apply_at, id) WHERE state = 'pending' AND apply_at IS NOT NULL;
