-- Push notifications, delivered from the event log: one row per webhook a caller registered
-- for a task, with its acked_seq (the last event delivered to it, in order) and its retry state.

CREATE TABLE push_configs (
    task_id         text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    id              text NOT NULL,
    owner           text NOT NULL,
    url             text NOT NULL,
    token           text,
    authentication  jsonb,
    acked_seq          integer NOT NULL DEFAULT 0,
    state           text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'dead')),
    attempts        integer NOT NULL DEFAULT 0,
    delivered       integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, id)
);
CREATE INDEX push_configs_due ON push_configs (next_attempt_at) WHERE state = 'active';
