DROP TABLE catalog_changes;
DROP TABLE audit_log;
DROP TABLE console_secret;
DROP TABLE console_sessions;
DROP TABLE sign_in_links;
DROP TABLE people;
