-- Seeing the service: a task's trace context (every step's span is a child of the task's,
-- across processes and restarts), and a record of each dead worker's runs handed over.

ALTER TABLE tasks ADD COLUMN trace_context text;

CREATE TABLE takeovers (
    id            bigserial PRIMARY KEY,
    dead_executor text NOT NULL,
    by_executor   text NOT NULL,
    runs          integer NOT NULL,
    at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
