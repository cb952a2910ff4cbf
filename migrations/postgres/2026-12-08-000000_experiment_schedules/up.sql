-- An experiment's schedule and a variant's own flow version (D29): the catalog file's
-- `starts_at`, `ends_at` and `flow_version`. Expand only: a release before these columns
-- neither reads nor writes them.
ALTER TABLE experiments ADD COLUMN starts_at TIMESTAMPTZ;
ALTER TABLE experiments ADD COLUMN ends_at TIMESTAMPTZ;
ALTER TABLE variants ADD COLUMN flow_version INTEGER;
ALTER TABLE rollouts ADD COLUMN to_version INTEGER;
