DROP INDEX analytics_events_occurred;
