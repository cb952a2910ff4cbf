DROP INDEX catalog_changes_due;
ALTER TABLE catalog_changes DROP COLUMN apply_at;
