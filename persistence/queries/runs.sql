-- The run path: what a step reads as it starts, and the one transaction that records it.

-- name: step_view
-- One statement, one snapshot: the task, its items, the workspace record, the step's effect
-- and (when asked) the budget.
SELECT t.state, t.goal, t.workspace_fingerprint, t.checkpoint_sha,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'item_id', i.item_id, 'position', i.position, 'title', i.title,
                   'run', i.run, 'verify_command', i.verify_command,
                   'verify_timeout_s', i.verify_timeout_s, 'max_attempts', i.max_attempts,
                   'status', i.status, 'attempts', i.attempts, 'evidence', i.evidence,
                   'commit_sha', i.commit_sha, 'failures', i.failures) ORDER BY i.position),
               '[]'::jsonb)
        FROM items i WHERE i.task_id = t.id) AS items,
       (SELECT jsonb_build_object('key', e.key, 'status', e.status, 'runs', e.runs,
                                  'result', e.result)
        FROM effects e WHERE e.key = %(key)s::text) AS effect,
       CASE WHEN %(budget)s::boolean THEN budget_status(t.id, '') END AS budget
FROM tasks t
WHERE t.id = %(task_id)s

-- name: lock_task
SELECT state, transition_seq, event_seq, status_text
FROM tasks
WHERE id = %(task_id)s
FOR UPDATE

-- name: lock_step
-- The task row, locked for the step's transaction, and the step's effect as it stands.
SELECT t.state, t.transition_seq, t.event_seq, t.status_text,
       e.status AS effect_status, e.result AS effect_result
FROM tasks t LEFT JOIN effects e ON e.key = %(key)s::text
WHERE t.id = %(task_id)s
FOR UPDATE OF t

-- name: update_item
UPDATE items
SET status = %(status)s, attempts = %(attempts)s,
    evidence = coalesce(%(evidence)s::jsonb, evidence),
    commit_sha = coalesce(%(commit_sha)s, commit_sha),
    failures = coalesce(%(failures)s, failures),
    updated_at = clock_timestamp()
WHERE task_id = %(task_id)s AND item_id = %(item_id)s

-- name: get_items
SELECT item_id, position, title, run, verify_command, verify_timeout_s, max_attempts, status,
       attempts, evidence, commit_sha, failures
FROM items WHERE task_id = %(task_id)s ORDER BY position

-- name: get_transitions
SELECT seq, item_id, attempt, from_state, to_state, reason, at
FROM transitions WHERE task_id = %(task_id)s ORDER BY seq

-- name: transitions_after
SELECT seq, item_id, attempt, from_state, to_state, reason, at
FROM transitions WHERE task_id = %(task_id)s AND seq > %(after)s ORDER BY seq
