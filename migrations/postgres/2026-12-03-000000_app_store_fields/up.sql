-- An app's App Store fields (D30): the catalog file's `apple_bundle_id` (the bundle id that
-- App Store Server Notifications for the app must name; NULL: none) and `apple_environments`
-- (a JSON array of "Production" and/or "Sandbox"; NULL: the default, ["Production"]). Expand
-- only: a release before these columns neither reads nor writes them (its import leaves them
-- as they are), and the catalog revision triggers on `apps` cover them.
ALTER TABLE apps ADD COLUMN apple_bundle_id TEXT;
ALTER TABLE apps ADD COLUMN apple_environments TEXT;
