DROP TABLE sticky_assignments;
ALTER TABLE experiments DROP COLUMN fallback_attribute;
ALTER TABLE experiments DROP COLUMN min_bucket_version;
ALTER TABLE experiments DROP COLUMN bucket_version;
ALTER TABLE experiments DROP COLUMN sticky;
ALTER TABLE experiments DROP COLUMN hash_version;
