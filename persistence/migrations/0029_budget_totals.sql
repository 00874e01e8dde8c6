-- A task's spending summed as it is charged, so a step's budget check reads one row instead
-- of summing every charge of the run: at 5,000 charges budget_status() took 5.4 ms, and a
-- step called it about 1.5 times. Kept by a trigger on budget_charges (functions.sql), which
-- fills it from the ledger when it is made.
CREATE TABLE budget_totals (
    task_id         text PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    tokens          bigint NOT NULL DEFAULT 0,
    usd             numeric NOT NULL DEFAULT 0,
    tokens_reserved bigint NOT NULL DEFAULT 0,
    usd_reserved    numeric NOT NULL DEFAULT 0,
    actions         bigint NOT NULL DEFAULT 0,
    by_tool         jsonb NOT NULL DEFAULT '{}'::jsonb  -- actions per tool
);
-- The run's last finished item, for its steps without progress since.
CREATE INDEX transitions_done ON transitions (task_id, at) WHERE to_state = 'done';
