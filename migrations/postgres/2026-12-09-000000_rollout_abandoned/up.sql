-- A rollout may end `abandoned` (issue 65, D29): its experiment left the catalog (an import
-- replaced its rule) or ended without it (concluded by `ends_at`, stopped by a person), so it
-- can neither step nor roll back, and it frees its placement with the reason in `reason`.
-- Expand only: one more allowed value; no release before this one has rollouts.
ALTER TABLE rollouts DROP CONSTRAINT rollouts_state_check;
ALTER TABLE rollouts ADD CONSTRAINT rollouts_state_check
    CHECK (state IN ('running', 'paused', 'rolled_back', 'completed', 'abandoned'));
