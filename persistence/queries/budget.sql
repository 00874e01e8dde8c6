-- name: reserve_charge
INSERT INTO budget_charges (key, task_id, kind, tokens, usd)
VALUES (%(key)s, %(task_id)s, 'reservation', %(tokens)s, %(usd)s)
ON CONFLICT (key) DO NOTHING

-- name: record_charge
-- The real charge replaces the step's reservation, once: a completed charge is never changed.
INSERT INTO budget_charges (key, task_id, kind, tool, tokens, usd, actions)
VALUES (%(key)s, %(task_id)s, %(kind)s, %(tool)s, %(tokens)s, %(usd)s, %(actions)s)
ON CONFLICT (key) DO UPDATE
SET kind = excluded.kind, tool = excluded.tool, tokens = excluded.tokens, usd = excluded.usd,
    actions = excluded.actions, at = clock_timestamp()
WHERE budget_charges.kind = 'reservation'

-- name: budget_status
SELECT budget_status(%(task_id)s, %(exclude_key)s) AS status

-- name: refresh_budget
UPDATE tasks SET metadata = metadata || jsonb_build_object('budget', budget_status(id, ''))
WHERE id = %(task_id)s

-- name: insert_alert
INSERT INTO budget_alerts (task_id, dimension, threshold)
VALUES (%(task_id)s, %(dimension)s, %(threshold)s)
ON CONFLICT DO NOTHING
RETURNING dimension

-- name: merge_metadata
UPDATE tasks SET metadata = metadata || %(patch)s::jsonb, updated_at = clock_timestamp()
WHERE id = %(task_id)s

-- name: append_alerts
UPDATE tasks
SET metadata = jsonb_set(metadata, '{budget_alerts}',
                         coalesce(metadata -> 'budget_alerts', '[]'::jsonb) || %(alerts)s::jsonb)
WHERE id = %(task_id)s
