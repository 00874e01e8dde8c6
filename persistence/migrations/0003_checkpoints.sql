-- Workspace integrity: the fingerprint after each step, and every checkpoint commit as a git
-- bundle, so a lost workspace can be rebuilt on any machine.

ALTER TABLE tasks ADD COLUMN workspace_fingerprint text;
ALTER TABLE tasks ADD COLUMN checkpoint_sha text;
ALTER TABLE items ADD COLUMN failures integer NOT NULL DEFAULT 0;

CREATE TABLE checkpoints (
    task_id    text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    sha        text NOT NULL,
    bundle     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, seq)
);
