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

-- name: operator_task
-- One task for a dashboard page, read past the per-process cache: a page refreshed because
-- its stream saw a change it was not notified of must show that change.
SELECT id AS task_id, owner, context_id, state, status_text, status_at, history, metadata, plan,
       report, event_seq, status_data, segment
FROM tasks
WHERE id = %(task_id)s

-- name: operator_task_version
-- What changes whenever a task page would show something new: the task's counters and last
-- change, and its push deliveries (which change without a change of the task).
SELECT t.event_seq, t.transition_seq, t.updated_at,
       (SELECT coalesce(string_agg(concat_ws(':', p.id, p.state, p.delivered, p.attempts),
                                   ',' ORDER BY p.id), '')
        FROM push_configs p WHERE p.task_id = t.id) AS pushes
FROM tasks t
WHERE t.id = %(task_id)s

-- name: operator_notes
-- The steering notes of a task, each with who sent it when its message says (the dashboard
-- puts the person's principal in the message's metadata).
SELECT n.seq, n.text, n.at, h.message -> 'metadata' ->> 'sentBy' AS sent_by
FROM notes n
JOIN tasks t ON t.id = n.task_id
LEFT JOIN LATERAL (
    SELECT m AS message FROM jsonb_array_elements(t.history) AS m
    WHERE m ->> 'messageId' = n.message_id LIMIT 1
) h ON true
WHERE n.task_id = %(task_id)s
ORDER BY n.seq

-- name: operator_record
-- What a person did from the dashboard that no other record names them in (a cancel): a
-- transition of the task in the state it is in, through apply_task_change() like every
-- change of a task.
WITH locked AS (
    SELECT id, state, transition_seq, event_seq FROM tasks WHERE id = %(task_id)s FOR UPDATE
)
SELECT apply_task_change(
           id,
           jsonb_build_object('transitions', jsonb_build_array(jsonb_build_object(
               'from_state', state, 'to_state', state, 'reason', %(reason)s::text))),
           transition_seq, event_seq)::text AS recorded
FROM locked
