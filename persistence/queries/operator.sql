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

-- name: run_tree
-- The tree of runs a task belongs to (its topmost parent down, each run before the runs it
-- delegated to), with the peers' tasks the runs wait on or waited on as leaves.
WITH RECURSIVE up(id, parent_id, n) AS (
    SELECT id, parent_id, 0 FROM tasks WHERE id = %(task_id)s
    UNION ALL
    SELECT t.id, t.parent_id, u.n + 1 FROM tasks t JOIN up u ON t.id = u.parent_id WHERE u.n < 20
),
down(id, depth, path) AS (
    SELECT id, 0, ARRAY[id] FROM up WHERE parent_id IS NULL OR n = 20
    UNION ALL
    SELECT t.id, d.depth + 1, d.path || t.id
    FROM tasks t JOIN down d ON t.parent_id = d.id WHERE d.depth < 20
)
SELECT d.id AS task_id, d.depth, t.state, left(t.goal, 120) AS goal, NULL::text AS peer,
       d.path
FROM down d JOIN tasks t ON t.id = d.id
UNION ALL
SELECT g.remote_id, d.depth + 1, coalesce(g.remote_state, g.state), left(g.goal, 120),
       g.peer, d.path || g.remote_id
FROM down d JOIN delegations g ON g.task_id = d.id AND g.peer IS NOT NULL
                                  AND g.remote_id IS NOT NULL
ORDER BY path
