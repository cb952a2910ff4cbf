-- Analysis settings per experiment (D27): the catalog file's `analysis` member as JSON text;
-- NULL: every default. Same column as migrations/postgres.
ALTER TABLE experiments ADD COLUMN analysis TEXT;
