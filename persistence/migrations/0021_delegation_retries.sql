-- An answer a person gave on our task to a peer's question, kept until the peer takes it (or
-- answers that it cannot): a peer that cannot be reached when the answer is given gets it
-- when it is back, sent again by the peer watcher under the same messageId (the peer keeps a
-- message once), so a crash neither loses it nor makes the peer apply it twice.

CREATE TABLE delegation_answers (
    task_id       text NOT NULL,
    delegation_id text NOT NULL,
    pause_id      text NOT NULL,
    message_id    text NOT NULL,
    approval      jsonb NOT NULL,
    state         text NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'sent', 'refused')),
    remote_state  text,
    tries         integer NOT NULL DEFAULT 0,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, pause_id),
    FOREIGN KEY (task_id, delegation_id) REFERENCES delegations (task_id, id) ON DELETE CASCADE
);
CREATE INDEX delegation_answers_pending ON delegation_answers (updated_at)
    WHERE state = 'pending';
