-- name: insert_task
INSERT INTO tasks (id, owner, context_id, state, status_text, goal, history, metadata, budget)
VALUES (%(task_id)s, %(owner)s, %(context_id)s, 'submitted', %(status_text)s, %(goal)s,
        jsonb_build_array(%(first_message)s::jsonb), %(metadata)s::jsonb, %(budget)s::jsonb)

-- name: insert_item
INSERT INTO items (task_id, position, item_id, title, run, verify_command, verify_timeout_s,
                   max_attempts)
VALUES (%(task_id)s, %(position)s, %(item_id)s, %(title)s, %(run)s, %(verify_command)s,
        %(verify_timeout_s)s, %(max_attempts)s)

-- name: get_task_any_owner
SELECT id AS task_id, owner, context_id, state, status_text, status_at, history, metadata, plan,
       report, event_seq
FROM tasks
WHERE id = %(task_id)s

-- name: list_tasks
WITH filtered AS (
    SELECT id AS task_id, owner, context_id, state, status_text, status_at, history, metadata,
           plan, report, event_seq
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

-- name: lock_owned_task
SELECT state, transition_seq, event_seq, status_text
FROM tasks
WHERE id = %(task_id)s AND owner = %(owner)s
FOR UPDATE

-- name: insert_transition
INSERT INTO transitions (task_id, seq, item_id, attempt, from_state, to_state, reason, at)
VALUES (%(task_id)s, %(seq)s, %(item_id)s, %(attempt)s, %(from_state)s, %(to_state)s, %(reason)s,
        coalesce(%(at)s::timestamptz, clock_timestamp()))

-- name: update_task_state
UPDATE tasks
SET state = %(state)s,
    status_text = %(status_text)s,
    status_at = clock_timestamp(),
    transition_seq = %(transition_seq)s,
    updated_at = clock_timestamp()
WHERE id = %(task_id)s

-- name: set_transition_seq
UPDATE tasks SET transition_seq = %(transition_seq)s, updated_at = clock_timestamp()
WHERE id = %(task_id)s

-- name: set_report
UPDATE tasks SET report = %(report)s::jsonb WHERE id = %(task_id)s

-- name: append_history
WITH changed AS (
    UPDATE tasks
    SET history = history || jsonb_build_array(%(message)s::jsonb), updated_at = clock_timestamp()
    WHERE id = %(task_id)s
    RETURNING id
)
SELECT pg_notify('a2a_task_events', id) FROM changed

-- name: refresh_summary
-- The plan artifact and metadata.progress are derived from the item rows in the same
-- transaction that changed them, so a read never disagrees with the rows.
UPDATE tasks t
SET plan = CASE WHEN s.items_total = 0 THEN NULL ELSE s.plan END,
    metadata = t.metadata || jsonb_build_object('progress', s.progress),
    updated_at = clock_timestamp()
FROM (
    SELECT count(i.item_id) AS items_total,
           jsonb_build_object(
               'goal', t2.goal,
               'items', coalesce(jsonb_agg(jsonb_build_object(
                   'id', i.item_id, 'title', i.title, 'status', i.status,
                   'attempts', i.attempts, 'verify', i.verify_command,
                   'evidence', i.evidence, 'commit', i.commit_sha) ORDER BY i.position)
                   FILTER (WHERE i.item_id IS NOT NULL), '[]'::jsonb)) AS plan,
           jsonb_build_object(
               'items_total', count(i.item_id),
               'items_done', count(*) FILTER (WHERE i.status = 'done'),
               'items_failed', count(*) FILTER (WHERE i.status = 'failed'),
               'current_item', (array_agg(i.item_id ORDER BY i.position)
                   FILTER (WHERE i.status IN ('in_progress', 'verifying')))[1]) AS progress
    FROM tasks t2 LEFT JOIN items i ON i.task_id = t2.id
    WHERE t2.id = %(task_id)s
    GROUP BY t2.id, t2.goal
) s
WHERE t.id = %(task_id)s

-- name: insert_status_event
INSERT INTO events (task_id, seq, body)
SELECT id, %(seq)s, jsonb_build_object('kind', 'status', 'state', state, 'text', status_text,
                                      'at', status_at)
FROM tasks WHERE id = %(task_id)s

-- name: insert_artifact_event
INSERT INTO events (task_id, seq, body)
SELECT id, %(seq)s, jsonb_build_object('kind', 'artifact', 'name', %(name)s::text,
    'data', CASE WHEN %(name)s::text = 'plan' THEN plan ELSE report END)
FROM tasks WHERE id = %(task_id)s

-- name: set_event_seq
UPDATE tasks SET event_seq = %(event_seq)s WHERE id = %(task_id)s

-- name: notify_task
SELECT pg_notify('a2a_task_events', %(task_id)s)

-- name: events_after
SELECT seq, body FROM events WHERE task_id = %(task_id)s AND seq > %(after)s ORDER BY seq
