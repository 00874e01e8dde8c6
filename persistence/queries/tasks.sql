-- name: get_task_any_owner
SELECT id AS task_id, owner, context_id, state, status_text, status_at, history, metadata, plan,
       report, event_seq, status_data, segment
FROM tasks
WHERE id = %(task_id)s

-- name: list_task_keys
-- A page of an owner's tasks by key only, newest status first, with the count of all that
-- match; their rows come from the read cache, or from `tasks_by_ids`.
WITH filtered AS (
    SELECT id AS task_id, status_at
    FROM tasks
    WHERE owner = %(owner)s
      AND (%(context_id)s::text IS NULL OR context_id = %(context_id)s)
      AND (%(state)s::text IS NULL OR state = %(state)s)
      AND (%(after)s::timestamptz IS NULL OR status_at > %(after)s)
)
SELECT f.*, (SELECT count(*) FROM filtered) AS total
FROM filtered f
WHERE %(cursor_at)s::timestamptz IS NULL
   OR (f.status_at, f.task_id) < (%(cursor_at)s::timestamptz, %(cursor_id)s::text)
ORDER BY f.status_at DESC, f.task_id DESC
LIMIT %(limit)s

-- name: tasks_by_ids
SELECT id AS task_id, owner, context_id, state, status_text, status_at, history, metadata, plan,
       report, event_seq, status_data, segment
FROM tasks
WHERE id = ANY(%(ids)s::text[])

-- name: lock_owned_task
SELECT state, transition_seq, event_seq, status_text
FROM tasks
WHERE id = %(task_id)s AND owner = %(owner)s
FOR UPDATE

-- name: items_to_continue
-- The items of an earlier task of this owner that a continuation starts from, the task
-- locked until the continuation is made (create_task() checks that it has ended).
SELECT task_items_json(id) AS items FROM tasks
WHERE id = %(task_id)s AND owner = %(owner)s
FOR UPDATE

-- name: events_after
-- Each plan event with the plan whole as of it (task_events() in functions.sql).
SELECT seq, body FROM task_events(%(task_id)s, %(after)s, NULL)

-- name: message_claim
SELECT task_id, digest FROM messages WHERE owner = %(owner)s AND message_id = %(message_id)s

-- name: answer_pause
SELECT answer_pause(%(task_id)s, %(payload)s::jsonb) AS result

-- name: add_note
SELECT add_note(%(task_id)s, %(payload)s::jsonb) AS result

-- name: notes_after
SELECT seq, text, at FROM notes WHERE task_id = %(task_id)s AND seq > %(after)s ORDER BY seq

-- name: task_file
SELECT f.media_type, f.filename, f.body, f.size, f.sha256
FROM task_files f JOIN tasks t ON t.id = f.task_id
WHERE f.task_id = %(task_id)s AND t.owner = %(owner)s AND f.kind = %(kind)s
  AND f.name = %(name)s

-- name: active_tasks_of_owner
-- Tasks of one caller that have not ended (index tasks_owner_active).
SELECT count(*) AS active
FROM tasks
WHERE owner = %(owner)s AND state IN ('submitted', 'working', 'input_required', 'auth_required')

-- name: queued_ahead
-- How many runs wait ahead of this task's first segment; no row once that segment is no longer
-- waiting (a worker took it). A task a worker has not enqueued yet (`unstarted_tasks`) waits
-- behind every run in the queue and every such task sent before it.
WITH mine AS (
    SELECT t.created_at, w.created_at AS enqueued_at, w.queue_name
    FROM tasks t LEFT JOIN dbos.workflow_status w ON w.workflow_uuid = t.id
    WHERE t.id = %(task_id)s AND t.state = 'submitted'
      AND (w.workflow_uuid IS NULL OR w.status = 'ENQUEUED')
)
SELECT (SELECT count(*)
        FROM dbos.workflow_status w
        WHERE w.status = 'ENQUEUED'
          AND (mine.enqueued_at IS NULL
               OR (w.queue_name = mine.queue_name AND w.created_at < mine.enqueued_at)))
     + CASE WHEN mine.enqueued_at IS NOT NULL THEN 0
            ELSE (SELECT count(*)
                  FROM tasks t
                  WHERE t.state = 'submitted' AND t.created_at < mine.created_at
                    AND NOT EXISTS (SELECT 1 FROM dbos.workflow_status w
                                    WHERE w.workflow_uuid = t.id)) END AS ahead
FROM mine

-- name: task_created_at
-- When an owner's task was submitted (the MCP door's `createdAt`).
SELECT created_at FROM tasks WHERE id = %(task_id)s AND owner = %(owner)s
