-- Back to the four states: an abandoned rollout reads as rolled back (its reason says why).
-- SQLite cannot change a CHECK in place: the table is rebuilt. Foreign keys are on, so dropping
-- the old table deletes its steps (ON DELETE CASCADE): they are kept aside and put back.
CREATE TEMP TABLE rollout_steps_kept AS SELECT * FROM rollout_steps;
CREATE TABLE rollouts_rebuilt (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    format INTEGER NOT NULL CHECK (format >= 1),
    app_id BLOB NOT NULL CHECK (length(app_id) = 16),
    placement TEXT NOT NULL,
    experiment_id BLOB NOT NULL CHECK (length(experiment_id) = 16),
    control_variant BLOB NOT NULL CHECK (length(control_variant) = 16),
    treatment_variant BLOB NOT NULL CHECK (length(treatment_variant) = 16),
    from_flow BLOB NOT NULL CHECK (length(from_flow) = 16),
    to_flow BLOB NOT NULL CHECK (length(to_flow) = 16),
    plan TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('running', 'paused', 'rolled_back', 'completed')),
    reason TEXT,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    to_version INTEGER
) STRICT;
INSERT INTO rollouts_rebuilt (id, format, app_id, placement, experiment_id, control_variant,
    treatment_variant, from_flow, to_flow, plan, state, reason, created_by, created_at,
    updated_at, to_version)
SELECT id, format, app_id, placement, experiment_id, control_variant, treatment_variant,
    from_flow, to_flow, plan, CASE state WHEN 'abandoned' THEN 'rolled_back' ELSE state END, reason, created_by, created_at, updated_at, to_version
FROM rollouts;
-- contract: no release before this one has rollouts; SQLite widens a CHECK only by a rebuild.
DROP TABLE rollouts;
-- contract: no release before this one has rollouts; SQLite widens a CHECK only by a rebuild.
ALTER TABLE rollouts_rebuilt RENAME TO rollouts;
CREATE INDEX rollouts_created_at ON rollouts (created_at, id);
CREATE INDEX rollouts_state ON rollouts (state, created_at, id);
INSERT INTO rollout_steps SELECT * FROM rollout_steps_kept;
-- contract: no release before this one has rollouts; SQLite widens a CHECK only by a rebuild.
DROP TABLE rollout_steps_kept;
