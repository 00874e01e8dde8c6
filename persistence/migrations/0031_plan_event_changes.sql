-- A plan event holds the items that changed, not the whole plan: a step of a 200-item plan
-- wrote its whole plan (about 200 KB of JSON, every item's history) into the event, 70 MB
-- of JSON for the run. Every PLAN_FULL_EVERY events one holds it whole again, and readers
-- build the plan as of each event from the last whole one (task_events() in functions.sql).
-- plan_seq: the task's latest plan event (the plan column is the plan as of it);
-- plan_full_seq: its latest plan event held whole. NULL: the next is written whole.
ALTER TABLE tasks ADD COLUMN plan_seq integer, ADD COLUMN plan_full_seq integer;
