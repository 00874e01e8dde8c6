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
