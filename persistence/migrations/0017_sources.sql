-- Work on the caller's code: a task's workspace may start from a git repository, files in
-- the message, or an earlier task's final state (`seed`: where it came from, and how to
-- rebuild it), and results are measured against its start commit (`base_sha`). Files in
-- and out (the message's files, a run's diff and bundle) are kept in `task_files`.

ALTER TABLE tasks ADD COLUMN seed jsonb;
ALTER TABLE tasks ADD COLUMN base_sha text;

CREATE TABLE task_files (
    task_id    text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('input', 'output')),
    name       text NOT NULL,
    media_type text NOT NULL,
    filename   text,
    size       bigint NOT NULL,
    sha256     text NOT NULL,
    body       bytea,
    url        text,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, kind, name)
);
