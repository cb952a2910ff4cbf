-- A catalog change can be scheduled (D29): the scheduler applies a pending change once its
-- `apply_at` has come. Expand only: a release before this column neither reads nor writes it,
-- so the changes it proposes have none (applied by a person, as before).
ALTER TABLE catalog_changes ADD COLUMN apply_at TEXT;
CREATE INDEX catalog_changes_due ON catalog_changes (apply_at, id) WHERE state = 'pending' AND apply_at IS NOT NULL;
