-- Event ids are unique per app (D25): one app's event can no longer stand in for another's, so
-- an id another tenant already used is stored too. Idempotency within an app is as before (D7):
-- a retried event carries its app, id and timestamp, and is stored once.
--
-- Every row is kept. Replacing the key rebuilds its index on every partition under an exclusive
-- lock of the table, which stops event writes for as long as that takes (docs/operations.md,
-- "Migrate").
ALTER TABLE analytics_events DROP CONSTRAINT analytics_events_pkey;
ALTER TABLE analytics_events ADD PRIMARY KEY (app_id, event_id, occurred_at);

-- Dead letters (D17) are kept per (app, event) the same way. A letter of an event names its app
-- in its payload (the event as JSON); letters of undecodable bus messages have neither.
ALTER TABLE analytics_dead_letters ADD COLUMN app_id UUID;
UPDATE analytics_dead_letters
    SET app_id = substring(convert_from(payload, 'UTF8')
                           FROM '"app_id"\s*:\s*"([0-9a-fA-F-]{36})"')::uuid
    WHERE event_id IS NOT NULL AND format = 'flowgate.event.v1+json';
DROP INDEX analytics_dead_letters_event_id;
CREATE UNIQUE INDEX analytics_dead_letters_app_event ON analytics_dead_letters (app_id, event_id)
    WHERE event_id IS NOT NULL;
