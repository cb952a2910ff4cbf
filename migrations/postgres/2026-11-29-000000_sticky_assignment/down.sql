DROP TABLE sticky_assignments;
ALTER TABLE experiments
    DROP COLUMN fallback_attribute,
    DROP COLUMN min_bucket_version,
    DROP COLUMN bucket_version,
    DROP COLUMN sticky,
    DROP COLUMN hash_version;
