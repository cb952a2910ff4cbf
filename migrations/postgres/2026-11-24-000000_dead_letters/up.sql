-- Dead letters (D17): events the store refused for good, and event bus messages that could not
-- be decoded or stored, kept with the error until they are replayed. Never subject to
-- retention (D21). `payload` holds the event as JSON (`format` flowgate.event.v1+json) or the
-- bus message as received (`format` as the message named it), byte for byte.
CREATE TABLE analytics_dead_letters (
    -- UUIDv7: ordered by arrival.
    id UUID PRIMARY KEY,
    -- NULL for a bus message that could not be decoded.
    event_id UUID,
    format TEXT NOT NULL,
    payload BYTEA NOT NULL,
    error TEXT NOT NULL,
    first_attempt_at TIMESTAMPTZ NOT NULL,
    last_attempt_at TIMESTAMPTZ NOT NULL,
    attempts INTEGER NOT NULL CHECK (attempts >= 1)
);
-- An event refused again (an SDK's retry) stays one letter.
CREATE UNIQUE INDEX analytics_dead_letters_event_id ON analytics_dead_letters (event_id)
    WHERE event_id IS NOT NULL;
