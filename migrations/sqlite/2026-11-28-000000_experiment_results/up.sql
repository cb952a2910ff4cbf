-- Experiment results (D22) read two kinds of events by user: an experiment's exposures
-- (`flow_open` and holdout `resolve_no_flow` events carrying it) and the default conversion
-- events (`flow_complete`, `purchase_complete`). Two partial indexes hold just those rows (about
-- a tenth and a twentieth of a typical app's events), each in user order (the order of the bytes,
-- in which the service merges the reads one user at a time), so a report reads them without
-- scanning the app's other events, and a write pays an index entry only for those rows. (Rows
-- per user kept by a trigger instead were measured far costlier to write: docs/benchmarks.md.)
CREATE INDEX analytics_events_exposures
    ON analytics_events (app_id, experiment_id, user_id, occurred_at, variant_id)
    WHERE experiment_id IS NOT NULL
      AND (event_type = 'flow_open' OR (event_type = 'resolve_no_flow' AND reason = 'holdout'));
CREATE INDEX analytics_events_outcomes
    ON analytics_events (app_id, user_id, occurred_at, event_type)
    WHERE event_type IN ('flow_complete', 'purchase_complete');
