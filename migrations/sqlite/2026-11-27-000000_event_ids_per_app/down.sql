-- Back to ids unique across apps: of the events that share an id across apps, the first stored
-- is kept.
CREATE TABLE analytics_events_by_id (
    event_id BLOB PRIMARY KEY CHECK (length(event_id) = 16),
    source TEXT NOT NULL,
    event_type TEXT NOT NULL,
    app_id BLOB NOT NULL,
    flow_id BLOB,
    flow_version_id BLOB,
    placement_key TEXT,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    device_platform TEXT NOT NULL,
    occurred_at TEXT NOT NULL,
    received_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')),
    sdk_version TEXT,
    experiment_id TEXT,
    variant_id TEXT,
    variant_name TEXT,
    reason TEXT,
    payload TEXT NOT NULL DEFAULT '{}'
) STRICT;
INSERT OR IGNORE INTO analytics_events_by_id
    SELECT * FROM analytics_events ORDER BY received_at, app_id;
DROP TABLE analytics_events;
ALTER TABLE analytics_events_by_id RENAME TO analytics_events;
CREATE INDEX analytics_events_app_occurred ON analytics_events (app_id, occurred_at);
CREATE INDEX analytics_events_occurred ON analytics_events (occurred_at);

DELETE FROM analytics_dead_letters
    WHERE event_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM analytics_dead_letters e
        WHERE e.event_id = analytics_dead_letters.event_id AND e.id < analytics_dead_letters.id);
DROP INDEX analytics_dead_letters_app_event;
ALTER TABLE analytics_dead_letters DROP COLUMN app_id;
CREATE UNIQUE INDEX analytics_dead_letters_event_id ON analytics_dead_letters (event_id)
    WHERE event_id IS NOT NULL;
