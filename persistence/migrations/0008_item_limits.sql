-- Per-item limits: a timeout for the item's run command, and a time limit for the whole item
-- (all its attempts), counted from its first attempt's start.

ALTER TABLE items ADD COLUMN run_timeout_s integer;
ALTER TABLE items ADD COLUMN timeout_s integer;
ALTER TABLE items ADD COLUMN started_at timestamptz;
