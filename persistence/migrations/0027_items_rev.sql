-- A counter of the task's item writes: a worker that keeps the items it recorded reads them
-- again only when another process wrote since (persistence/runs.py, PostgresRunStore.view).
ALTER TABLE tasks ADD COLUMN items_rev bigint NOT NULL DEFAULT 0;
