-- Messages received, by (owner, messageId): a repeated messageId is recognised, not applied
-- again. The digest tells a retry (same content) from a reuse (different content). The task
-- reference is checked at commit, so a submission can claim its message before its task row.

CREATE TABLE messages (
    owner       text NOT NULL,
    message_id  text NOT NULL,
    task_id     text NOT NULL,
    digest      text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (owner, message_id),
    CONSTRAINT messages_task_id_fkey FOREIGN KEY (task_id) REFERENCES tasks (id)
        ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX messages_task ON messages (task_id);

-- Tasks made before this migration: their first message, content unknown ('').
INSERT INTO messages (owner, message_id, task_id, digest)
SELECT owner, history -> 0 ->> 'messageId', id, ''
FROM tasks
WHERE history -> 0 ->> 'messageId' IS NOT NULL
ON CONFLICT DO NOTHING;
