-- Staged rollouts (D29), step records and scheduler leases: see migrations/postgres for what
-- each holds. Times are RFC 3339 UTC text with six fractional digits, UUIDs 16-byte BLOBs, as
-- in the other tables.
CREATE TABLE rollouts (
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
    updated_at TEXT NOT NULL
) STRICT;
CREATE INDEX rollouts_created_at ON rollouts (created_at, id);
CREATE INDEX rollouts_state ON rollouts (state, created_at, id);

CREATE TABLE rollout_steps (
    rollout_id BLOB NOT NULL REFERENCES rollouts (id) ON DELETE CASCADE,
    step_index INTEGER NOT NULL CHECK (step_index >= 0),
    share REAL NOT NULL,
    applied_at TEXT NOT NULL,
    revision INTEGER NOT NULL CHECK (revision >= 0),
    figures TEXT NOT NULL,
    PRIMARY KEY (rollout_id, step_index)
) STRICT;

CREATE TABLE scheduler_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at TEXT NOT NULL
) STRICT;
