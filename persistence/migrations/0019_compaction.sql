-- Retention in two steps: an ended task's step records, events and push deliveries (and its
-- workflows and workspace) go after A2A_AGENT_RECORD_RETENTION_S; the task itself (its row,
-- plan, report, items, transitions and result files) stays until A2A_AGENT_TASK_RETENTION_S.

ALTER TABLE tasks ADD COLUMN compacted_at timestamptz;
