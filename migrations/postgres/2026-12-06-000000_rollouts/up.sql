-- Staged rollouts (D29): each rollout, the steps applied to it, and the leases that let one
-- replica at a time run the scheduler. Expand only: new tables that release 0.2.0 never reads.
-- The catalog snapshot reads none of them, so no trigger bumps the catalog revision for them
-- (a step's catalog write bumps it through the catalog's own tables). No foreign key points
-- into the catalog: a rollout stays as history whatever the catalog later holds.

-- A rollout's fields in columns; `plan` is JSON text (flowgate_domain::rollouts::RolloutPlan),
-- `format` the row's version (D26; see crates/flowgate-domain/src/rollouts.rs). `reason` is
-- why it was paused, rolled back or completed; NULL while it runs as planned.
CREATE TABLE rollouts (
    id UUID PRIMARY KEY,
    format INTEGER NOT NULL CHECK (format >= 1),
    app_id UUID NOT NULL,
    placement TEXT NOT NULL,
    experiment_id UUID NOT NULL,
    control_variant UUID NOT NULL,
    treatment_variant UUID NOT NULL,
    from_flow UUID NOT NULL,
    to_flow UUID NOT NULL,
    plan TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('running', 'paused', 'rolled_back', 'completed')),
    reason TEXT,
    created_by TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX rollouts_created_at ON rollouts (created_at, id);
CREATE INDEX rollouts_state ON rollouts (state, created_at, id);

-- The steps applied, one row per (rollout, step): the primary key is what makes a step
-- applied at most once, whichever replica tries. `share` in percent; `revision` the catalog
-- revision the step left; `figures` JSON text, the guardrails' figures read before it.
CREATE TABLE rollout_steps (
    rollout_id UUID NOT NULL REFERENCES rollouts (id) ON DELETE CASCADE,
    step_index INTEGER NOT NULL CHECK (step_index >= 0),
    share DOUBLE PRECISION NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL,
    revision BIGINT NOT NULL CHECK (revision >= 0),
    figures TEXT NOT NULL,
    PRIMARY KEY (rollout_id, step_index)
);

-- Named leases: `holder` holds `name` until `expires_at`, then anyone may take it.
CREATE TABLE scheduler_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
