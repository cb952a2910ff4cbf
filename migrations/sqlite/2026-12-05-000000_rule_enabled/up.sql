-- A rule can be off (D28): the catalog file's `enabled` member (absent: on). Same column as
-- migrations/postgres; a boolean is an INTEGER 0 or 1 (STRICT tables have no BOOLEAN). Expand
-- only: a release before it writes rules that are on by the default.
ALTER TABLE rules ADD COLUMN enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1));
