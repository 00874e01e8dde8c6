-- The effects ledger: one row per keyed effect (command, tool call, model call).

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
