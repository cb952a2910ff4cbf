-- Sticky assignment (D23). Experiments gain GrowthBook's hash version (D5) and the sticky
-- settings; the catalog revision triggers on `experiments` cover the new columns as they are.
-- Existing experiments keep their behaviour: hash version 2 (NULL), not sticky, versions 0.
-- Same columns as migrations/postgres; a boolean is an INTEGER 0 or 1 (STRICT tables have no
-- BOOLEAN).
ALTER TABLE experiments ADD COLUMN hash_version INTEGER CHECK (hash_version IN (1, 2));
ALTER TABLE experiments ADD COLUMN sticky INTEGER NOT NULL DEFAULT 0 CHECK (sticky IN (0, 1));
ALTER TABLE experiments ADD COLUMN bucket_version INTEGER NOT NULL DEFAULT 0
    CHECK (bucket_version >= 0);
ALTER TABLE experiments ADD COLUMN min_bucket_version INTEGER NOT NULL DEFAULT 0
    CHECK (min_bucket_version >= 0);
ALTER TABLE experiments ADD COLUMN fallback_attribute TEXT;

-- The stored assignments: GrowthBook's assignment documents, one row per assignment (see
-- migrations/postgres for the layout). No foreign key to apps: assignments outlive catalog
-- edits, and the app id only scopes them per tenant. No trigger bumps the catalog revision for
-- this table (the snapshot does not read it).
CREATE TABLE sticky_assignments (
    app_id BLOB NOT NULL CHECK (length(app_id) = 16),
    attribute_name TEXT NOT NULL,
    attribute_value TEXT NOT NULL,
    assignment_key TEXT NOT NULL,
    variant_key TEXT NOT NULL,
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')),
    PRIMARY KEY (app_id, attribute_name, attribute_value, assignment_key)
) STRICT;
