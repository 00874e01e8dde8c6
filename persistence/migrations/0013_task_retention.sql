-- Ended tasks are deleted (with their events and every other row of theirs) once they have
-- been over for A2A_AGENT_TASK_RETENTION_S: the supervisor finds them oldest first.

CREATE INDEX tasks_ended ON tasks (status_at)
    WHERE state IN ('completed', 'failed', 'canceled', 'rejected');
