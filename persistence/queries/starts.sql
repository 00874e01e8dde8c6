-- The run starter's query (persistence/starts.py): tasks sent whose run no worker has
-- enqueued yet.

-- name: unstarted_tasks
-- Tasks sent whose run no worker has enqueued yet, oldest first, locked for the worker that
-- enqueues them (`RunStarter`): another worker's starter skips them, and once this one's
-- transaction ends their workflows exist and no starter sees them again.
SELECT t.id AS task_id FROM tasks t
WHERE t.state = 'submitted'
  AND NOT EXISTS (SELECT 1 FROM dbos.workflow_status w WHERE w.workflow_uuid = t.id)
ORDER BY t.created_at
LIMIT %(limit)s
FOR UPDATE OF t SKIP LOCKED
