-- Counters that outlive the rows they count. /metrics reads steps, tokens, cost, budget stops
-- and push deliveries from the rows every process writes; retention deletes those rows, and a
-- counter computed from them went down (a false reset to Prometheus). What a delete removes
-- is first folded into metric_totals by statement triggers (functions.sql), in the deleting
-- transaction, so a counter is always live rows plus what was folded.

CREATE TABLE metric_totals (
    name  text NOT NULL,
    label text NOT NULL DEFAULT '',
    value double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (name, label)
);

-- Every failed delivery attempt and every config that went dead, counted (attempts is only
-- the current run of failures).
ALTER TABLE push_configs
    ADD COLUMN failures integer NOT NULL DEFAULT 0,
    ADD COLUMN dead_lettered integer NOT NULL DEFAULT 0;
