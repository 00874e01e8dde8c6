-- Pauses: a run that needs a person writes a request and ends its workflow segment; the wait
-- is this row. A reply records the decision and starts the next segment (tasks.segment).
-- Steering notes from the caller, kept for the model's next context.

ALTER TABLE tasks ADD COLUMN segment integer NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN policy jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE tasks ADD COLUMN status_data jsonb;
ALTER TABLE tasks ADD COLUMN waited_s double precision NOT NULL DEFAULT 0;

ALTER TABLE items ADD COLUMN irreversible boolean NOT NULL DEFAULT false;
ALTER TABLE items ADD COLUMN ask text;
ALTER TABLE items DROP CONSTRAINT items_status_check;
ALTER TABLE items ADD CONSTRAINT items_status_check
    CHECK (status IN ('pending', 'in_progress', 'verifying', 'done', 'failed', 'skipped'));

CREATE TABLE pauses (
    task_id      text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    id           text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('irreversible_action', 'plan_change',
                      'budget_threshold', 'repeated_failure', 'plan_review', 'question',
                      'stale_fact')),
    segment      integer NOT NULL,
    item_id      text,
    attempt      integer,
    summary      text NOT NULL,
    details      jsonb NOT NULL DEFAULT '{}'::jsonb,
    options      jsonb NOT NULL,
    on_expiry    text NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at   timestamptz NOT NULL,
    decision     text,
    note         text,
    decided_by   text,
    decided_how  text CHECK (decided_how IN ('reply', 'expired', 'ended')),
    decided_at   timestamptz,
    message_id   text,
    PRIMARY KEY (task_id, id)
);
CREATE UNIQUE INDEX pauses_one_open ON pauses (task_id) WHERE decision IS NULL;
CREATE INDEX pauses_expiring ON pauses (expires_at) WHERE decision IS NULL;

CREATE TABLE notes (
    task_id    text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    text       text NOT NULL,
    message_id text NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, seq)
);

-- The supervisor's scans stay small with many tasks waiting: runs that may be stuck, tasks
-- past the maximum age, and segments that may need starting each have their own index.
DROP INDEX tasks_unfinished;
CREATE INDEX tasks_unfinished ON tasks (updated_at) WHERE state IN ('submitted', 'working');
CREATE INDEX tasks_open_by_age ON tasks (created_at)
    WHERE state IN ('submitted', 'working', 'input_required');
CREATE INDEX tasks_resumed ON tasks (updated_at) WHERE segment > 0 AND report IS NULL;
