DROP INDEX analytics_events_outcomes;
DROP INDEX analytics_events_exposures;
