-- Its triggers go with it.
DROP TABLE webhook_keys;
