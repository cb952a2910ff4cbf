-- Back to four states: a rejected change reads as withdrawn (its note says why).
UPDATE catalog_changes SET state = 'withdrawn' WHERE state = 'rejected';
ALTER TABLE catalog_changes DROP CONSTRAINT catalog_changes_state_check;
ALTER TABLE catalog_changes ADD CONSTRAINT catalog_changes_state_check
    CHECK (state IN ('pending', 'applied', 'withdrawn', 'failed'));
