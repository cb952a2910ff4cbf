-- Dead letters (D17): events the store refused for good, and event bus messages that could not
-- be decoded or stored, kept with the error until they are replayed. `payload` holds the event
-- as JSON (`format` flowgate.event.v1+json) or the bus message as received, byte for byte.
CREATE TABLE analytics_dead_letters (
    -- UUIDv7: ordered by arrival.
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    -- NULL for a bus message that could not be decoded.
    event_id BLOB CHECK (event_id IS NULL OR length(event_id) = 16),
    format TEXT NOT NULL,
    payload BLOB NOT NULL,
    error TEXT NOT NULL,
    first_attempt_at TEXT NOT NULL,
    last_attempt_at TEXT NOT NULL,
    attempts INTEGER NOT NULL CHECK (attempts >= 1)
) STRICT;
-- An event refused again (an SDK's retry) stays one letter.
CREATE UNIQUE INDEX analytics_dead_letters_event_id ON analytics_dead_letters (event_id)
    WHERE event_id IS NOT NULL;
