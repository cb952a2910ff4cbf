-- Store notifications (D30): App Store Server Notifications V2 and RevenueCat webhooks, each
-- stored once per app, source and notification id (Apple's notificationUUID, RevenueCat's
-- event id). The columns are what the results count; `payload` is the verified JSON (format
-- `format`, see crates/flowgate-domain/src/store_notifications.rs). No foreign key to apps:
-- what a store said outlives catalog edits; the app id scopes it per tenant.
CREATE TABLE store_notifications (
    app_id UUID NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('apple', 'revenuecat')),
    notification_id TEXT NOT NULL,
    format INTEGER NOT NULL CHECK (format >= 1),
    notification_type TEXT NOT NULL,
    subtype TEXT,
    environment TEXT,
    -- The user the app gave the store; NULL: none given (never counted).
    user_id TEXT,
    transaction_id TEXT,
    original_transaction_id TEXT,
    product_id TEXT,
    purchased_at TIMESTAMPTZ,
    -- In units of `currency`.
    price DOUBLE PRECISION CHECK (price >= 0),
    currency TEXT,
    trial BOOLEAN NOT NULL DEFAULT false,
    refunded BOOLEAN NOT NULL DEFAULT false,
    payload TEXT NOT NULL,
    received_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, source, notification_id)
);

-- The results' read: an app's transactions by user, in the bytes' order.
CREATE INDEX store_notifications_transactions ON store_notifications
    (app_id, user_id COLLATE "C", purchased_at)
    WHERE user_id IS NOT NULL AND transaction_id IS NOT NULL;
