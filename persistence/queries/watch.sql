-- The supervisor's queries: segments to start and runs that stopped making progress.

-- name: stuck_tasks
-- Runs that finished no step for stuck_after_s, or that are older than max_age_s (a task
-- waiting for a person is not stuck, but the run's age counts the wait).
SELECT id AS task_id, 'no_progress' AS why FROM tasks
WHERE state IN ('submitted', 'working')
  AND updated_at < clock_timestamp() - make_interval(secs => %(stuck_after_s)s)
  AND created_at >= clock_timestamp() - make_interval(secs => %(max_age_s)s)
UNION ALL
SELECT id AS task_id, 'max_age' AS why FROM tasks
WHERE state IN ('submitted', 'working', 'input_required')
  AND created_at < clock_timestamp() - make_interval(secs => %(max_age_s)s)
LIMIT 100

-- name: dead_runs
-- Runs the engine gave up on while their task still says it is worked: the segment's
-- workflow ended in error (an exception outside every step's catch), was dead-lettered
-- after too many recoveries, or was cancelled in DBOS by hand. Nothing would ever move such
-- a task again. (DBOS's own table, read: its status is the only record of that ending.)
SELECT t.id AS task_id, t.segment, w.workflow_uuid AS workflow_id, w.status,
       left(coalesce(w.error, ''), 2000) AS error
FROM tasks t
JOIN dbos.workflow_status w
  ON w.workflow_uuid = CASE WHEN t.segment = 0 THEN t.id ELSE t.id || ':s' || t.segment END
WHERE t.state IN ('submitted', 'working') AND t.report IS NULL
  AND w.status IN ('ERROR', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', 'CANCELLED')
LIMIT 100

-- name: key_runs_by_task
-- Runs enqueued before the run queue was partitioned by task carry no partition key, and a
-- partitioned queue never hands one out: each gets its task's id (its workflow id without
-- the segment suffix). (DBOS's own table, written once per launch; none match after.)
UPDATE dbos.workflow_status
SET queue_partition_key = regexp_replace(workflow_uuid, ':s[0-9]+$', '')
WHERE queue_name = %(queue)s AND queue_partition_key IS NULL
  AND status IN ('ENQUEUED', 'PENDING')

-- name: expired_pauses
-- Requests nobody answered in time: each follows its default.
SELECT p.task_id, t.owner, p.id, p.on_expiry
FROM pauses p JOIN tasks t ON t.id = p.task_id
WHERE p.decision IS NULL AND p.expires_at < clock_timestamp()
ORDER BY p.expires_at
LIMIT 100

-- name: prune_pushes
-- Push configs whose task ended and whose every event was delivered, idle for retention_s.
-- Dead configs stay (an operator may retry them); the events stay as long as their task.
DELETE FROM push_configs c
USING tasks t
WHERE t.id = c.task_id
  AND t.state IN ('completed', 'failed', 'canceled', 'rejected')
  AND c.state = 'active' AND c.acked_seq >= t.event_seq
  AND c.next_attempt_at < clock_timestamp() - make_interval(secs => %(retention_s)s)

-- name: prune_tasks
-- Ended tasks over for longer than retention_s, oldest first: deleted with every row of
-- theirs (events, items, effects, pushes... all cascade). A task being read or changed right
-- now is left for the next pass. The NOTIFY drops each from every process's read cache.
WITH gone AS (
    DELETE FROM tasks
    WHERE id IN (SELECT id FROM tasks
                 WHERE state IN ('completed', 'failed', 'canceled', 'rejected')
                   AND status_at < clock_timestamp() - make_interval(secs => %(retention_s)s)
                 ORDER BY status_at
                 LIMIT %(limit)s
                 FOR UPDATE SKIP LOCKED)
    RETURNING id, segment
)
SELECT id, segment, pg_notify('a2a_task_events', id) AS told FROM gone

-- name: missing_tasks
-- Which of these ids (workspace directories on a worker's disk) have no task any more, or
-- a task whose records were compacted (its workspace goes with them).
SELECT x.id FROM unnest(%(ids)s::text[]) AS x(id)
WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = x.id AND t.compacted_at IS NULL)

-- name: compact_tasks
-- Ended tasks over for longer than retention_s, not compacted yet, oldest first: their step
-- records (effects, step results), stream events and push deliveries are deleted; the task
-- row, its plan, report, items, transitions, decisions, checkpoints and result files stay.
WITH picked AS (
    SELECT id, segment FROM tasks
    WHERE state IN ('completed', 'failed', 'canceled', 'rejected')
      AND compacted_at IS NULL
      AND status_at < clock_timestamp() - make_interval(secs => %(retention_s)s)
    ORDER BY status_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), effects_gone AS (
    DELETE FROM effects WHERE task_id IN (SELECT id FROM picked)
), steps_gone AS (
    DELETE FROM step_results WHERE task_id IN (SELECT id FROM picked)
), events_gone AS (
    DELETE FROM events WHERE task_id IN (SELECT id FROM picked)
), pushes_gone AS (
    DELETE FROM push_configs WHERE task_id IN (SELECT id FROM picked)
), marked AS (
    -- Its plan events are gone: a plan event written after (none is expected of an ended
    -- task) holds the plan whole, not changes to one no longer kept.
    UPDATE tasks SET compacted_at = clock_timestamp(), plan_full_seq = NULL
    WHERE id IN (SELECT id FROM picked)
)
SELECT id, segment FROM picked

-- name: segments_to_start
-- Tasks whose wait ended (a reply, an expiry, a cancel) but whose next segment may not have
-- been enqueued (a crash after the commit): enqueueing it again is a no-op in DBOS when it was.
SELECT id AS task_id, segment FROM tasks
WHERE segment > 0 AND report IS NULL
  AND updated_at < clock_timestamp() - make_interval(secs => %(older_than_s)s)
  AND state IN ('working', 'completed', 'failed', 'canceled', 'rejected')
  -- A run waiting on a delegate has nothing to start until the delegate ends.
  AND NOT (state = 'working' AND EXISTS (SELECT 1 FROM delegations d
                                         WHERE d.task_id = tasks.id AND d.state = 'pending'))
ORDER BY updated_at
LIMIT 500

-- name: orphaned_waits
-- Tasks waiting for a person with no request open: nothing can answer them, so nothing moves
-- them on. Only a fault leaves one (a request asked again under an id already decided did,
-- once): a step that waits writes its request in the statement that sets the state, and a
-- reply moves its task on in the transaction that decides it. The scan runs at the
-- supervisor's slow cadence (an hour), through the index of open tasks by age.
SELECT id AS task_id, segment FROM tasks t
WHERE state = 'input_required'
  AND updated_at < clock_timestamp() - make_interval(secs => %(older_than_s)s)
  AND NOT EXISTS (SELECT 1 FROM pauses p WHERE p.task_id = t.id AND p.decision IS NULL)
ORDER BY created_at
LIMIT 100
