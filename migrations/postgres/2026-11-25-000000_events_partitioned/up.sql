-- The events table at scale (D21): partitioned by day of the event's own `occurred_at` (UTC),
-- so that retention drops whole partitions instead of deleting rows. Uniqueness is on
-- (event_id, occurred_at): a retried event carries the same timestamp, so it is stored once
-- (D7). Day partitions: retention by the day, a partition of a busy day stays small enough to
-- vacuum and index quickly, and 33 partitions cover the accepted window (docs/benchmarks.md
-- compares their write cost with one table).
--
-- The table as it was is kept as one partition, for every instant up to the end of the
-- current day (UTC) or of its latest event: no row is rewritten, the conversion costs one
-- scan (checking the partition bound) and one index build on (event_id, occurred_at), under
-- an exclusive lock on the table (docs/operations.md, "Events retention and partitions").
ALTER TABLE analytics_events RENAME TO analytics_events_legacy;
ALTER TABLE analytics_events_legacy RENAME CONSTRAINT analytics_events_pkey TO analytics_events_legacy_pkey;
ALTER INDEX analytics_events_app_occurred RENAME TO analytics_events_legacy_app_occurred;

-- The same columns and defaults; the key gains the partition key.
CREATE TABLE analytics_events (
    LIKE analytics_events_legacy INCLUDING DEFAULTS,
    PRIMARY KEY (event_id, occurred_at)
) PARTITION BY RANGE (occurred_at);
CREATE INDEX analytics_events_app_occurred ON analytics_events (app_id, occurred_at);

-- Creates the missing day partitions from `first_day` to `last_day` (UTC days), one caller at a
-- time (an advisory lock held to the end of the transaction: every replica calls it, D21).
-- A day another partition already covers (the converted table's) is skipped. Each partition is
-- created on its own and then attached, which locks the parent in SHARE UPDATE EXCLUSIVE mode
-- only: event writes go on meanwhile. Returns the number created.
CREATE FUNCTION flowgate_ensure_event_partitions(first_day DATE, last_day DATE) RETURNS INTEGER
LANGUAGE plpgsql AS $$
DECLARE
    day DATE;
    name TEXT;
    created INTEGER := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(7305210001);
    FOR day IN SELECT d::date FROM generate_series(first_day, last_day, INTERVAL '1 day') AS d LOOP
        name := 'analytics_events_p' || to_char(day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass(name) IS NOT NULL;
        BEGIN
            EXECUTE format('CREATE TABLE %I (LIKE analytics_events INCLUDING DEFAULTS)', name);
            EXECUTE format('ALTER TABLE analytics_events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                           name, day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
            created := created + 1;
        EXCEPTION WHEN invalid_object_definition THEN
            -- "would overlap partition": the day is covered already.
            NULL;
        END;
    END LOOP;
    RETURN created;
END
$$;

-- Drops the partitions whose every instant is before `older_than` (retention, D21), under the
-- same lock. Returns the number dropped.
CREATE FUNCTION flowgate_drop_event_partitions(older_than TIMESTAMPTZ) RETURNS INTEGER
LANGUAGE plpgsql AS $$
DECLARE
    part RECORD;
    dropped INTEGER := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(7305210001);
    FOR part IN
        SELECT c.oid::regclass AS name,
               substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)')::timestamptz AS upper
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'analytics_events'::regclass
    LOOP
        IF part.upper IS NOT NULL AND part.upper <= older_than THEN
            EXECUTE format('DROP TABLE %s', part.name);
            dropped := dropped + 1;
        END IF;
    END LOOP;
    RETURN dropped;
END
$$;

DO $$
DECLARE
    today DATE := (now() AT TIME ZONE 'UTC')::date;
    latest TIMESTAMPTZ;
    bound TIMESTAMPTZ;
BEGIN
    SELECT max(occurred_at) INTO latest FROM analytics_events_legacy;
    IF latest IS NULL THEN
        DROP TABLE analytics_events_legacy;
    ELSE
        bound := greatest((today + 1)::timestamp AT TIME ZONE 'UTC',
                          (date_trunc('day', latest AT TIME ZONE 'UTC') + INTERVAL '1 day') AT TIME ZONE 'UTC');
        -- Only (event_id, occurred_at) is unique, as in every other partition.
        ALTER TABLE analytics_events_legacy DROP CONSTRAINT analytics_events_legacy_pkey;
        EXECUTE format('ALTER TABLE analytics_events ATTACH PARTITION analytics_events_legacy FOR VALUES FROM (MINVALUE) TO (%L)', bound);
    END IF;
    -- The default accepted window (events.max_past_secs 31 days, events.max_future_secs 1 day)
    -- and two days beyond; the service extends it to its own settings.
    PERFORM flowgate_ensure_event_partitions(today - 32, today + 3);
END
$$;
