-- Catalog import history (D19): one row per applied import (one that changed the store),
-- written in the import's own transaction, so a row exists exactly when its import committed.
-- An import of a file the store already holds writes nothing and adds no row. No trigger bumps
-- the catalog revision for this table (the snapshot does not read it), and events retention
-- (D21) never deletes from it. Same columns as migrations/postgres.
CREATE TABLE catalog_imports (
    id INTEGER PRIMARY KEY,
    revision INTEGER NOT NULL CHECK (revision >= 1),
    imported_at TEXT NOT NULL,
    sha256 TEXT NOT NULL CHECK (length(sha256) = 64 AND sha256 NOT GLOB '*[^0-9a-f]*'),
    file TEXT NOT NULL,
    workspaces INTEGER NOT NULL CHECK (workspaces >= 0),
    apps INTEGER NOT NULL CHECK (apps >= 0),
    flows INTEGER NOT NULL CHECK (flows >= 0),
    versions INTEGER NOT NULL CHECK (versions >= 0),
    placements INTEGER NOT NULL CHECK (placements >= 0),
    keys INTEGER NOT NULL CHECK (keys >= 0)
) STRICT;
