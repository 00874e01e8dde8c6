-- The writes behind every change of a task live in functions.sql; these call them.

-- name: apply_task_change
SELECT apply_task_change(%(task_id)s, %(change)s::jsonb, %(seq)s, %(event_seq)s)

-- name: record_step
SELECT record_step(%(task_id)s, %(step)s::jsonb, %(bundle)s::bytea) AS recorded

-- name: create_task
SELECT create_task(%(task)s::jsonb) AS task
