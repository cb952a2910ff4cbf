-- Back to one table: every row copied into it (a rewrite of the whole table). Rows that differ
-- only in occurred_at keep the first stored.
CREATE TABLE analytics_events_unpartitioned (
    event_id UUID PRIMARY KEY,
    source TEXT NOT NULL,
    event_type TEXT NOT NULL,
    app_id UUID NOT NULL,
    flow_id UUID,
    flow_version_id UUID,
    placement_key TEXT,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    device_platform TEXT NOT NULL,
    occurred_at TIMESTAMPTZ NOT NULL,
    received_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    sdk_version TEXT,
    experiment_id TEXT,
    variant_id TEXT,
    variant_name TEXT,
    reason TEXT,
    payload JSONB NOT NULL DEFAULT '{}'
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
