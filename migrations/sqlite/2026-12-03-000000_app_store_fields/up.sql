-- An app's App Store fields (D30): the catalog file's `apple_bundle_id` (NULL: none) and
-- `apple_environments` as JSON text (NULL: the default, ["Production"]). Same columns as
-- migrations/postgres.
ALTER TABLE apps ADD COLUMN apple_bundle_id TEXT;
ALTER TABLE apps ADD COLUMN apple_environments TEXT;
