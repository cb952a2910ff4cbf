DROP TABLE scheduler_leases;
DROP TABLE rollout_steps;
DROP TABLE rollouts;
