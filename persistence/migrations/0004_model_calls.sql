-- Every model call with its usage; the response itself is the effect's result.

CREATE TABLE model_calls (
    key                text PRIMARY KEY,
    task_id            text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    item_id            text,
    attempt            integer,
    purpose            text NOT NULL,
    model              text NOT NULL,
    stop_reason        text NOT NULL,
    input_tokens       integer NOT NULL,
    output_tokens      integer NOT NULL,
    cache_read_tokens  integer NOT NULL,
    cache_write_tokens integer NOT NULL,
    at                 timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX model_calls_task ON model_calls (task_id);
