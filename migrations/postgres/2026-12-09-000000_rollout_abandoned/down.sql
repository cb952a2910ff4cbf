-- Back to the four states: an abandoned rollout reads as rolled back (its reason says why).
UPDATE rollouts SET state = 'rolled_back' WHERE state = 'abandoned';
ALTER TABLE rollouts DROP CONSTRAINT rollouts_state_check;
ALTER TABLE rollouts ADD CONSTRAINT rollouts_state_check
    CHECK (state IN ('running', 'paused', 'rolled_back', 'completed'));
