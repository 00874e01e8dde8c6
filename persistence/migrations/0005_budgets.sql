-- Budgets: each task's limits, a charge per step (keyed, written once) and alerts (once).

ALTER TABLE tasks ADD COLUMN budget jsonb NOT NULL DEFAULT '{}'::jsonb;

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
