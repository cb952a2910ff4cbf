-- Back to ids unique across apps: of the events that share an id and timestamp across apps, the
-- first stored is kept and the others are deleted (they cannot be told apart by the old key).
DELETE FROM analytics_events e
    USING analytics_events f
    WHERE e.event_id = f.event_id AND e.occurred_at = f.occurred_at
      AND (e.received_at, e.app_id) > (f.received_at, f.app_id);
ALTER TABLE analytics_events DROP CONSTRAINT analytics_events_pkey;
ALTER TABLE analytics_events ADD PRIMARY KEY (event_id, occurred_at);

DELETE FROM analytics_dead_letters d
    USING analytics_dead_letters e
    WHERE d.event_id = e.event_id AND d.id > e.id;
DROP INDEX analytics_dead_letters_app_event;
ALTER TABLE analytics_dead_letters DROP COLUMN app_id;
CREATE UNIQUE INDEX analytics_dead_letters_event_id ON analytics_dead_letters (event_id)
    WHERE event_id IS NOT NULL;
