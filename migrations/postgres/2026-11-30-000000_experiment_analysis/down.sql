ALTER TABLE experiments DROP COLUMN analysis;
