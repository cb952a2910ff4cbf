-- A rule can be off (D28): the catalog file's `enabled` member (format 2; absent: on). Resolve
-- skips a rule that is off as one whose experiment is not running. Expand only: a release
-- before this column neither reads nor writes it, so its rules read as on, and the rules it
-- writes (an import replaces a placement's rule list) are on by the default. A constant
-- default adds the column without rewriting the table. The catalog revision triggers on
-- `rules` cover it.
ALTER TABLE rules ADD COLUMN enabled BOOLEAN NOT NULL DEFAULT true;
