DROP TABLE store_notifications;
