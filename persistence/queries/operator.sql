-- What the dashboard reads: every owner's tasks, for an operator.

-- name: operator_tasks
SELECT id AS task_id, owner, state, goal, status_text, metadata, created_at, status_at,
       updated_at
FROM tasks
WHERE (%(state)s::text IS NULL OR state = %(state)s)
  AND (%(owner)s::text IS NULL OR owner = %(owner)s)
ORDER BY (state = 'input_required') DESC, updated_at DESC
LIMIT %(limit)s

-- name: operator_owners
SELECT DISTINCT owner FROM tasks ORDER BY owner LIMIT 200
