ALTER TABLE rollouts DROP COLUMN to_version;
ALTER TABLE variants DROP COLUMN flow_version;
ALTER TABLE experiments DROP COLUMN ends_at;
ALTER TABLE experiments DROP COLUMN starts_at;
