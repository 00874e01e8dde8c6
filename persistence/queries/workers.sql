-- name: get_worker
SELECT executor_id, host, pid, role, heartbeat_at,
       heartbeat_at > clock_timestamp() - make_interval(secs => %(timeout_s)s) AS fresh
FROM workers WHERE executor_id = %(executor_id)s

-- name: upsert_worker
INSERT INTO workers (executor_id, host, pid, role)
VALUES (%(executor_id)s, %(host)s, %(pid)s, %(role)s)
ON CONFLICT (executor_id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, role = excluded.role,
    started_at = clock_timestamp(), heartbeat_at = clock_timestamp()

-- name: heartbeat
UPDATE workers SET heartbeat_at = clock_timestamp()
WHERE executor_id = %(executor_id)s AND pid = %(pid)s AND host = %(host)s
RETURNING executor_id

-- name: mark_stopped
UPDATE workers SET heartbeat_at = 'epoch'
WHERE executor_id = %(executor_id)s AND pid = %(pid)s AND host = %(host)s

-- name: janitor_session_timeout
SELECT set_config('idle_in_transaction_session_timeout', %(ms)s::text, true)

-- name: engine_idle_in_transaction
-- For the engine's (DBOS's) sessions: a transaction left idle this long ends (see
-- persistence/engine_connections.py).
SELECT set_config('idle_in_transaction_session_timeout', %(ms)s, false)

-- name: try_janitor_lock
SELECT pg_try_advisory_xact_lock(7272002) AS locked

-- name: dead_workers
SELECT executor_id FROM workers
WHERE heartbeat_at < clock_timestamp() - make_interval(secs => %(timeout_s)s)
  AND executor_id <> %(executor_id)s
ORDER BY heartbeat_at
FOR UPDATE SKIP LOCKED

-- name: forget_worker
DELETE FROM workers WHERE executor_id = %(executor_id)s

-- name: record_takeover
INSERT INTO takeovers (dead_executor, by_executor, runs)
VALUES (%(dead)s, %(by)s, %(runs)s)
