ALTER TABLE apps DROP COLUMN apple_environments;
ALTER TABLE apps DROP COLUMN apple_bundle_id;
