-- name: budget_status
SELECT budget_status(%(task_id)s, %(exclude_key)s) AS status

-- name: insert_alert
INSERT INTO budget_alerts (task_id, dimension, threshold)
VALUES (%(task_id)s, %(dimension)s, %(threshold)s)
ON CONFLICT DO NOTHING
RETURNING dimension

-- name: append_alerts
UPDATE tasks
SET metadata = jsonb_set(metadata, '{budget_alerts}',
                         coalesce(metadata -> 'budget_alerts', '[]'::jsonb) || %(alerts)s::jsonb)
WHERE id = %(task_id)s
