-- Sticky assignment (D23). Experiments gain GrowthBook's hash version (D5) and the sticky
-- settings; the catalog revision triggers on `experiments` cover the new columns as they are.
-- Existing experiments keep their behaviour: hash version 2 (NULL), not sticky, versions 0.
ALTER TABLE experiments
    -- NULL: 2.
    ADD COLUMN hash_version INTEGER CHECK (hash_version IN (1, 2)),
    ADD COLUMN sticky BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN bucket_version INTEGER NOT NULL DEFAULT 0 CHECK (bucket_version >= 0),
    ADD COLUMN min_bucket_version INTEGER NOT NULL DEFAULT 0 CHECK (min_bucket_version >= 0),
    -- The attribute read beside `user_id` (GrowthBook's `fallbackAttribute`); NULL: none.
    ADD COLUMN fallback_attribute TEXT;

-- The stored assignments: GrowthBook's assignment documents, one row per assignment, so a
-- write merges into a document with a plain upsert and replicas never overwrite each other's
-- assignments. A document is the rows of one (app_id, attribute_name, attribute_value);
-- `assignment_key` is `<experiment id>__<bucket version>`, `variant_key` a variant id.
-- No foreign key to apps: assignments outlive catalog edits, and the app id only scopes them
-- per tenant. The catalog snapshot does not read this table, so no trigger bumps the revision
-- for it.
CREATE TABLE sticky_assignments (
    app_id UUID NOT NULL,
    attribute_name TEXT NOT NULL,
    attribute_value TEXT NOT NULL,
    assignment_key TEXT NOT NULL,
    variant_key TEXT NOT NULL,
    -- When the assignment was last written (by the database's clock).
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, attribute_name, attribute_value, assignment_key)
);
