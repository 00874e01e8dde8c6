-- Facts: what the run established about the world (a key, its value, where it came from,
-- when it was checked, how to check it again and how old it may get). Items declare the facts
-- they establish; the model records facts with a tool.

ALTER TABLE items ADD COLUMN facts jsonb NOT NULL DEFAULT '[]'::jsonb;

CREATE TABLE facts (
    task_id       text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    key           text NOT NULL,
    value         text NOT NULL,
    source        text NOT NULL,
    check_command text,
    max_age_s     integer,
    checked_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, key)
);
