-- Analysis settings per experiment (D27): the catalog file's `analysis` member as JSON text
-- (`primary_metric`, `guardrail_metrics`, `sequential`, `minimum_users`, each optional), read
-- with its defaults filled in; NULL: every default. Expand only: a release before this column
-- neither reads nor writes it, and the catalog revision triggers on `experiments` cover it.
ALTER TABLE experiments ADD COLUMN analysis TEXT;
