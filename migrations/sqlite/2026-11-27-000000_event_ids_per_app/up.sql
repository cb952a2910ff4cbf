-- Event ids are unique per app (D25): one app's event can no longer stand in for another's, so
-- an id another tenant already used is stored too. Idempotency within an app is as before (D7).
--
-- SQLite cannot change a table's key in place: the table is rebuilt with every row (a copy of the
-- whole table, in the migration's transaction; docs/operations.md, "Migrate").
CREATE TABLE analytics_events_by_app (
    event_id BLOB NOT NULL CHECK (length(event_id) = 16),
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
    payload TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (app_id, event_id)
) STRICT;
INSERT INTO analytics_events_by_app SELECT * FROM analytics_events;
DROP TABLE analytics_events;
ALTER TABLE analytics_events_by_app RENAME TO analytics_events;
-- Retention (D21) deletes app by app on (app_id, occurred_at): no index on occurred_at alone,
-- which would cost every event write one more index insert.
CREATE INDEX analytics_events_app_occurred ON analytics_events (app_id, occurred_at);

-- Dead letters (D17) are kept per (app, event) the same way. A letter of an event names its app
-- in its payload (the event as JSON); letters of undecodable bus messages have neither.
ALTER TABLE analytics_dead_letters ADD COLUMN app_id BLOB CHECK (app_id IS NULL OR length(app_id) = 16);
UPDATE analytics_dead_letters
    SET app_id = unhex(replace(json_extract(CAST(payload AS TEXT), '$.app_id'), '-', ''))
    WHERE event_id IS NOT NULL AND format = 'flowgate.event.v1+json'
      AND json_valid(CAST(payload AS TEXT))
      AND length(replace(json_extract(CAST(payload AS TEXT), '$.app_id'), '-', '')) = 32;
DROP INDEX analytics_dead_letters_event_id;
CREATE UNIQUE INDEX analytics_dead_letters_app_event ON analytics_dead_letters (app_id, event_id)
    WHERE event_id IS NOT NULL;
