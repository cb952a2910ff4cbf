-- Store notifications (D30): see migrations/postgres for the columns. Times are RFC 3339 UTC
-- text with six fractional digits, booleans INTEGER 0 or 1, as in the other tables.
CREATE TABLE store_notifications (
    app_id BLOB NOT NULL CHECK (length(app_id) = 16),
    source TEXT NOT NULL CHECK (source IN ('apple', 'revenuecat')),
    notification_id TEXT NOT NULL,
    format INTEGER NOT NULL CHECK (format >= 1),
    notification_type TEXT NOT NULL,
    subtype TEXT,
    environment TEXT,
    user_id TEXT,
    transaction_id TEXT,
    original_transaction_id TEXT,
    product_id TEXT,
    purchased_at TEXT,
    price REAL CHECK (price >= 0),
    currency TEXT,
    trial INTEGER NOT NULL DEFAULT 0 CHECK (trial IN (0, 1)),
    refunded INTEGER NOT NULL DEFAULT 0 CHECK (refunded IN (0, 1)),
    payload TEXT NOT NULL,
    received_at TEXT NOT NULL,
    PRIMARY KEY (app_id, source, notification_id)
) STRICT;

CREATE INDEX store_notifications_transactions ON store_notifications
    (app_id, user_id, purchased_at)
    WHERE user_id IS NOT NULL AND transaction_id IS NOT NULL;
