-- Worker heartbeats: readiness, executor-id collisions, and (later) failover.

CREATE TABLE workers (
    executor_id  text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    role         text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
