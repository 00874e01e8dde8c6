-- What the plan shows of each item, computed once in Python (persistence/views.py) and kept
-- on its row; the plan artifact is assembled from these views and the items' histories.
-- Rows from before this version get theirs from `migrate` (persistence/migrate.py), which
-- computes them from the rows.

ALTER TABLE items ADD COLUMN view jsonb;

-- What `migrate` looks for at every start: empty once every row has its view, so the look
-- costs an index probe, not a scan of every item.
CREATE INDEX items_without_view ON items (task_id, item_id) WHERE view IS NULL;
