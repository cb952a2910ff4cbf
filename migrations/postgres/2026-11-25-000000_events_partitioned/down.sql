-- Back to one table: every row copied into it (a rewrite of the whole table). Rows that differ
-- only in occurred_at keep the first stored.
CREATE TABLE analytics_events_unpartitioned (
    LIKE analytics_events INCLUDING DEFAULTS,
    CONSTRAINT analytics_events_unpartitioned_pkey PRIMARY KEY (event_id)
);
INSERT INTO analytics_events_unpartitioned
    SELECT * FROM analytics_events ORDER BY received_at
    ON CONFLICT (event_id) DO NOTHING;
DROP TABLE analytics_events;
ALTER TABLE analytics_events_unpartitioned RENAME TO analytics_events;
ALTER TABLE analytics_events RENAME CONSTRAINT analytics_events_unpartitioned_pkey TO analytics_events_pkey;
CREATE INDEX analytics_events_app_occurred ON analytics_events (app_id, occurred_at);
DROP FUNCTION flowgate_ensure_event_partitions(DATE, DATE);
DROP FUNCTION flowgate_drop_event_partitions(TIMESTAMPTZ);
