-- A reviewer may reject a pending change with a comment (D35): `rejected`, the comment in
-- `note`. Expand only: one more allowed value; no release before this one has changes.
ALTER TABLE catalog_changes DROP CONSTRAINT catalog_changes_state_check;
ALTER TABLE catalog_changes ADD CONSTRAINT catalog_changes_state_check
    CHECK (state IN ('pending', 'applied', 'withdrawn', 'failed', 'rejected'));
