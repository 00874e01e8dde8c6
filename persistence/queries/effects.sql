-- The effects ledger: one row per keyed effect (command, tool call, model call).

-- name: premark_effect
-- The effect the run performs next, marked in the previous step's transaction; no run yet.
INSERT INTO effects (key, task_id, item_id, attempt, step, status, runs)
VALUES (%(key)s, %(task_id)s, %(item_id)s, %(attempt)s, %(step)s, 'started', 0)
ON CONFLICT (key) DO NOTHING

-- name: start_effect
-- A run of an effect that must be on record before it starts (a re-run after a crash).
INSERT INTO effects (key, task_id, item_id, attempt, step, status, runs)
VALUES (%(key)s, %(task_id)s, %(item_id)s, %(attempt)s, %(step)s, 'started', %(runs)s)
ON CONFLICT (key) DO UPDATE
SET runs = greatest(effects.runs + 1, excluded.runs), started_at = clock_timestamp()
WHERE effects.status = 'started'
RETURNING key, status, runs, result

-- name: get_effect
SELECT key, status, runs, result FROM effects WHERE key = %(key)s

-- name: complete_effect
INSERT INTO effects (key, task_id, item_id, attempt, step, status, runs, result, completed_at)
VALUES (%(key)s, %(task_id)s, %(item_id)s, %(attempt)s, %(step)s, 'completed', %(runs)s,
        %(result)s::jsonb, clock_timestamp())
ON CONFLICT (key) DO UPDATE
SET status = 'completed', result = excluded.result, completed_at = excluded.completed_at,
    runs = greatest(effects.runs, excluded.runs)
