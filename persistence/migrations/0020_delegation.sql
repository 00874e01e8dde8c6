-- Delegation: a chunk of work handed to a child run of this service or to a peer A2A agent.
-- The parent waits as a row (`delegations`, state pending), never as a parked workflow; a
-- child links to its parent (`tasks.parent_id`); a delegate's question surfaces on the parent
-- as a `delegated_request`; a plan item may be delegated to a peer (`items.delegate_to`).

ALTER TABLE tasks ADD COLUMN parent_id text;
CREATE INDEX tasks_parent ON tasks (parent_id) WHERE parent_id IS NOT NULL;

ALTER TABLE items ADD COLUMN delegate_to jsonb;

CREATE TABLE delegations (
    task_id      text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    id           text NOT NULL,
    item_id      text,
    attempt      integer,
    peer         text,
    child_id     text,
    remote_id    text,
    goal         text NOT NULL,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'ended')),
    remote_state text,
    result       jsonb,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at     timestamptz,
    PRIMARY KEY (task_id, id)
);
CREATE INDEX delegations_child ON delegations (child_id) WHERE child_id IS NOT NULL;
CREATE INDEX delegations_open_peers ON delegations (updated_at)
    WHERE state = 'pending' AND peer IS NOT NULL;

ALTER TABLE pauses DROP CONSTRAINT pauses_kind_check;
ALTER TABLE pauses ADD CONSTRAINT pauses_kind_check
    CHECK (kind IN ('irreversible_action', 'plan_change', 'budget_threshold',
                    'repeated_failure', 'plan_review', 'question', 'stale_fact',
                    'weak_check', 'regression', 'delegated_request'));

-- A child run's spending, charged once more to each task above it.
ALTER TABLE budget_charges DROP CONSTRAINT budget_charges_kind_check;
ALTER TABLE budget_charges ADD CONSTRAINT budget_charges_kind_check
    CHECK (kind IN ('reservation', 'model', 'tool', 'command', 'child'));
