-- The whole current schema, for a fresh install. Keep it equal to the migrations in order;
-- tests/test_migrations.py compares the two.

CREATE TABLE tasks (
    id             text PRIMARY KEY,
    owner          text NOT NULL DEFAULT '',
    context_id     text NOT NULL,
    state          text NOT NULL CHECK (state IN ('submitted', 'working', 'input_required',
                        'auth_required', 'completed', 'failed', 'canceled', 'rejected')),
    status_text    text,
    status_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    goal           text NOT NULL,
    history        jsonb NOT NULL DEFAULT '[]'::jsonb,
    metadata       jsonb NOT NULL DEFAULT '{}'::jsonb,
    plan           jsonb,
    report         jsonb,
    transition_seq integer NOT NULL DEFAULT 0,
    event_seq      integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    workspace_fingerprint text,
    checkpoint_sha text,
    budget         jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX tasks_owner_status_at ON tasks (owner, status_at DESC, id DESC);
CREATE INDEX tasks_owner_context ON tasks (owner, context_id);
CREATE INDEX tasks_unfinished ON tasks (state) WHERE state IN ('submitted', 'working');

CREATE TABLE items (
    task_id          text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    position         integer NOT NULL,
    item_id          text NOT NULL,
    title            text NOT NULL,
    run              text,
    verify_command   text NOT NULL,
    verify_timeout_s integer NOT NULL,
    max_attempts     integer NOT NULL CHECK (max_attempts >= 1),
    status           text NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'in_progress', 'verifying', 'done', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    evidence         jsonb,
    commit_sha       text,
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    failures         integer NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, item_id),
    UNIQUE (task_id, position)
);

CREATE TABLE transitions (
    task_id    text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    item_id    text,
    attempt    integer,
    from_state text,
    to_state   text NOT NULL,
    reason     text NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, seq)
);

CREATE TABLE events (
    task_id text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq     integer NOT NULL,
    body    jsonb NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, seq)
);

CREATE TABLE effects (
    key          text PRIMARY KEY,
    task_id      text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    item_id      text,
    attempt      integer,
    step         text NOT NULL,
    status       text NOT NULL CHECK (status IN ('started', 'completed')),
    runs         integer NOT NULL DEFAULT 1,
    result       jsonb,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    completed_at timestamptz
);
CREATE INDEX effects_task ON effects (task_id);

CREATE TABLE workers (
    executor_id  text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    role         text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE checkpoints (
    task_id    text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    sha        text NOT NULL,
    bundle     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, seq)
);

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

CREATE TABLE budget_charges (
    key      text PRIMARY KEY,
    task_id  text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    kind     text NOT NULL CHECK (kind IN ('reservation', 'model', 'tool', 'command')),
    tool     text,
    tokens   bigint NOT NULL DEFAULT 0,
    usd      numeric(14, 6) NOT NULL DEFAULT 0,
    actions  integer NOT NULL DEFAULT 0,
    at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX budget_charges_task ON budget_charges (task_id, at);

CREATE TABLE budget_alerts (
    task_id   text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    dimension text NOT NULL,
    threshold integer NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, dimension, threshold)
);

-- A task's budget, per dimension: used (the charges, reservations included) and limit.
-- `exclude_key` leaves out one step's own reservation when that step checks before spending.
CREATE FUNCTION budget_status(p_task_id text, p_exclude_key text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH t AS (SELECT id, budget, created_at FROM tasks WHERE id = p_task_id),
    charges AS (
        SELECT * FROM budget_charges WHERE task_id = p_task_id AND key <> p_exclude_key
    ),
    totals AS (
        SELECT coalesce(sum(tokens), 0) AS tokens, coalesce(sum(usd), 0) AS usd,
               coalesce(sum(actions), 0) AS actions
        FROM charges
    ),
    by_tool AS (
        SELECT coalesce(jsonb_object_agg(tool, jsonb_build_object(
                   'used', n, 'limit', (SELECT budget -> 'max_actions' -> tool FROM t))),
                   '{}'::jsonb) AS tools
        FROM (SELECT tool, sum(actions) AS n FROM charges WHERE tool IS NOT NULL
              GROUP BY tool) x
    ),
    progress AS (
        SELECT count(*) AS steps FROM charges
        WHERE kind <> 'reservation'
          AND at > coalesce((SELECT max(at) FROM transitions
                             WHERE task_id = p_task_id AND to_state = 'done'),
                            '-infinity'::timestamptz)
    )
    SELECT jsonb_build_object(
        'usd', jsonb_build_object('used', round(totals.usd, 6), 'limit', t.budget -> 'max_usd'),
        'tokens', jsonb_build_object('used', totals.tokens, 'limit', t.budget -> 'max_tokens'),
        'wall_s', jsonb_build_object(
            'used', round(extract(epoch FROM clock_timestamp() - t.created_at)::numeric, 1),
            'limit', t.budget -> 'max_wall_s'),
        'steps_without_progress', jsonb_build_object(
            'used', progress.steps, 'limit', t.budget -> 'max_steps_without_progress'),
        'actions', jsonb_build_object(
            'used', totals.actions, 'limit', t.budget -> 'max_actions' -> '*'),
        'actions_by_tool', by_tool.tools,
        'limits', t.budget,
        'alerts', (SELECT coalesce(jsonb_agg(dimension || ':' || threshold), '[]'::jsonb)
                   FROM budget_alerts WHERE task_id = p_task_id))
    FROM t, totals, by_tool, progress
$$;
