-- Delegations: work a run handed to a child run of this service or to a peer's task.

-- name: delegation_changed
SELECT delegation_changed(%(task_id)s, %(id)s, %(state)s, %(request)s::jsonb,
                          %(result)s::jsonb) AS outcome

-- name: open_peer_delegations
-- Pending delegations to peers not looked at for `older_than_s` (pushes may not come), with
-- their parent's state (a parent that ended cancels them).
SELECT d.task_id, d.id, d.peer, d.remote_id, t.state AS parent_state
FROM delegations d JOIN tasks t ON t.id = d.task_id
WHERE d.state = 'pending' AND d.peer IS NOT NULL AND d.remote_id IS NOT NULL
  AND d.updated_at < clock_timestamp() - make_interval(secs => %(older_than_s)s)
ORDER BY d.updated_at
LIMIT %(limit)s

-- name: get_delegation
SELECT d.task_id, d.id, d.peer, d.remote_id, d.child_id, d.state, t.state AS parent_state
FROM delegations d JOIN tasks t ON t.id = d.task_id
WHERE d.task_id = %(task_id)s AND d.id = %(id)s

-- name: parent_to_wake
-- A child run ended: its parent's segment to start, if the parent goes on.
SELECT t.id, t.segment
FROM delegations d JOIN tasks t ON t.id = d.task_id
WHERE d.child_id = %(child_id)s AND d.state = 'ended'
  AND t.state IN ('working', 'submitted')

-- name: open_delegates
-- The delegations a task still waits on, with the child run's owner and segment (a child run
-- of this service) or the peer's task.
SELECT d.task_id, d.id, d.peer, d.remote_id, d.child_id, d.state, t.state AS parent_state,
       c.owner AS child_owner, c.segment AS child_segment
FROM delegations d JOIN tasks t ON t.id = d.task_id LEFT JOIN tasks c ON c.id = d.child_id
WHERE d.task_id = %(task_id)s AND d.state = 'pending'
ORDER BY d.created_at

-- name: end_delegation
UPDATE delegations
SET state = 'ended', result = %(result)s::jsonb, ended_at = clock_timestamp(),
    updated_at = clock_timestamp()
WHERE task_id = %(task_id)s AND id = %(id)s AND state = 'pending'

-- name: touch_delegation
UPDATE delegations SET updated_at = clock_timestamp()
WHERE task_id = %(task_id)s AND id = %(id)s

-- name: queue_answer
-- The answer to a peer's question, kept until the peer takes it; given once per request.
WITH added AS (
    INSERT INTO delegation_answers (task_id, delegation_id, pause_id, message_id, approval)
    VALUES (%(task_id)s, %(delegation_id)s, %(pause_id)s, %(message_id)s, %(approval)s::jsonb)
    ON CONFLICT (task_id, pause_id) DO NOTHING
    RETURNING *
), found AS (
    SELECT * FROM added
    UNION ALL
    SELECT * FROM delegation_answers
    WHERE task_id = %(task_id)s AND pause_id = %(pause_id)s AND NOT EXISTS (SELECT 1 FROM added)
)
SELECT f.task_id, f.delegation_id, f.pause_id, f.message_id, f.approval, f.state, f.tries,
       d.peer, d.remote_id
FROM found f JOIN delegations d ON d.task_id = f.task_id AND d.id = f.delegation_id

-- name: answers_to_send
-- Answers a peer has not taken yet, not tried for `older_than_s`, of delegations still
-- pending under a task that goes on (an ended one's peer task is canceled instead).
SELECT a.task_id, a.delegation_id, a.pause_id, a.message_id, a.approval, a.state, a.tries,
       d.peer, d.remote_id
FROM delegation_answers a
JOIN delegations d ON d.task_id = a.task_id AND d.id = a.delegation_id
JOIN tasks t ON t.id = a.task_id
WHERE a.state = 'pending' AND d.state = 'pending' AND d.remote_id IS NOT NULL
  AND t.state NOT IN ('completed', 'failed', 'canceled', 'rejected')
  AND a.updated_at < clock_timestamp() - make_interval(secs => %(older_than_s)s)
ORDER BY a.updated_at
LIMIT %(limit)s

-- name: pending_answers_of
-- One delegation's answers the peer has not taken yet, to give before its task is looked at:
-- a worker killed after the peer took an answer, before that was recorded, must not let the
-- delegation end with the answer still pending (sent again, the peer keeps it once).
SELECT a.task_id, a.delegation_id, a.pause_id, a.message_id, a.approval, a.state, a.tries,
       d.peer, d.remote_id
FROM delegation_answers a
JOIN delegations d ON d.task_id = a.task_id AND d.id = a.delegation_id
WHERE a.task_id = %(task_id)s AND a.delegation_id = %(delegation_id)s AND a.state = 'pending'
  AND d.remote_id IS NOT NULL
ORDER BY a.updated_at

-- name: answer_sent
UPDATE delegation_answers
SET state = 'sent', remote_state = %(remote_state)s, tries = tries + 1, last_error = NULL,
    updated_at = clock_timestamp()
WHERE task_id = %(task_id)s AND pause_id = %(pause_id)s AND state = 'pending'

-- name: answer_failed
UPDATE delegation_answers
SET tries = tries + 1, last_error = %(error)s, updated_at = clock_timestamp()
WHERE task_id = %(task_id)s AND pause_id = %(pause_id)s AND state = 'pending'

-- name: answer_refused
SELECT delegation_answer_refused(%(task_id)s, %(pause_id)s, %(error)s)
