DROP TABLE analytics_dead_letters;
