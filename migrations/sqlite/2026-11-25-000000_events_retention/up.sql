-- Retention on SQLite (D21): old events are deleted in small batches by occurred_at, which
-- this index finds without scanning the table.
CREATE INDEX analytics_events_occurred ON analytics_events (occurred_at);
