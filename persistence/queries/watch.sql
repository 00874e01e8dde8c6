-- The supervisor's queries: lost enqueues and runs that stopped making progress.

-- name: submitted_tasks
SELECT id AS task_id FROM tasks
WHERE state = 'submitted' AND created_at < clock_timestamp() - make_interval(secs => %(older_than_s)s)
ORDER BY created_at
LIMIT 500

-- name: stuck_tasks
-- Runs that finished no step for stuck_after_s, or that are older than max_age_s.
SELECT id AS task_id,
       CASE WHEN created_at < clock_timestamp() - make_interval(secs => %(max_age_s)s)
            THEN 'max_age' ELSE 'no_progress' END AS why
FROM tasks
WHERE state IN ('submitted', 'working')
  AND (updated_at < clock_timestamp() - make_interval(secs => %(stuck_after_s)s)
       OR created_at < clock_timestamp() - make_interval(secs => %(max_age_s)s))
ORDER BY created_at
LIMIT 100
