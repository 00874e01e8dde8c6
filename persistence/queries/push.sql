-- Push configs (the edge) and their delivery from the event log (the deliverer).

-- name: put_push_config
-- The deliverers hear of it at once (the events it is owed may all be older than it).
WITH put AS (
    INSERT INTO push_configs (task_id, id, owner, url, token, authentication, acked_seq,
                              protocol)
    VALUES (%(task_id)s, %(id)s, %(owner)s, %(url)s, %(token)s, %(authentication)s,
            %(acked_seq)s, %(protocol)s)
    ON CONFLICT (task_id, id) DO UPDATE
    SET url = excluded.url, token = excluded.token, authentication = excluded.authentication,
        protocol = excluded.protocol,
        state = 'active', attempts = 0, last_error = NULL, next_attempt_at = clock_timestamp()
    RETURNING task_id, id, url, token, authentication, protocol
)
SELECT put.*, pg_notify('a2a_push_events', put.task_id) AS told FROM put

-- name: get_push_configs
SELECT task_id, id, url, token, authentication, acked_seq, state, attempts, delivered, last_error,
       protocol
FROM push_configs
WHERE task_id = %(task_id)s AND owner = %(owner)s AND (%(id)s::text IS NULL OR id = %(id)s)
ORDER BY created_at, id

-- name: delete_push_config
-- No row when there was none to delete (deleting is idempotent: the edge does not mind).
DELETE FROM push_configs WHERE task_id = %(task_id)s AND owner = %(owner)s AND id = %(id)s
RETURNING id

-- name: claim_pushes
-- Configs with an event after their acked_seq and no attempt pending: leased for lease_s (a
-- deliverer that dies lets the lease run out; another then sends the event again). A 0.3
-- config also gets `base`, the task as of its cursor: the last status event and the last
-- event of each artifact up to acked_seq (its receiver gets the whole Task at each event).
WITH due AS (
    SELECT c.task_id, c.id
    FROM push_configs c JOIN tasks t ON t.id = c.task_id
    WHERE c.state = 'active' AND c.next_attempt_at <= clock_timestamp()
      AND c.acked_seq < t.event_seq
    ORDER BY c.next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE push_configs c
SET next_attempt_at = clock_timestamp() + make_interval(secs => %(lease_s)s)
FROM due
WHERE c.task_id = due.task_id AND c.id = due.id
RETURNING c.task_id, c.id, c.url, c.token, c.authentication, c.acked_seq, c.attempts,
          c.protocol,
          (SELECT t.context_id FROM tasks t WHERE t.id = c.task_id) AS context_id,
          CASE WHEN c.protocol = '0.3' THEN (
              SELECT coalesce(jsonb_agg(jsonb_build_object(
                                  'seq', b.seq, 'body', event_body(c.task_id, b.seq, b.body),
                                  'age_s', 0) ORDER BY b.seq),
                              '[]')
              -- The last event of each kind and name; a plan's changes are the plan's.
              FROM (SELECT DISTINCT ON (k.kind, k.name) e.seq, e.body
                    FROM events e
                    CROSS JOIN LATERAL (
                        SELECT CASE WHEN e.body ->> 'kind' = 'plan_changes' THEN 'artifact'
                                    ELSE e.body ->> 'kind' END AS kind,
                               CASE WHEN e.body ->> 'kind' = 'plan_changes' THEN 'plan'
                                    ELSE e.body ->> 'name' END AS name) AS k
                    WHERE e.task_id = c.task_id AND e.seq <= c.acked_seq
                    ORDER BY k.kind, k.name, e.seq DESC) b)
          ELSE '[]'::jsonb END AS base,
          (SELECT coalesce(jsonb_agg(jsonb_build_object(
                      'seq', e.seq, 'body', e.body,
                      'age_s', extract(epoch FROM clock_timestamp() - e.at)) ORDER BY e.seq),
                    '[]')
           FROM task_events(c.task_id, c.acked_seq, %(batch)s) e) AS events

-- name: push_delivered
-- The cursor moves on past a batch the receiver took (from_seq .. seq); the next batch
-- comes back in the same statement. No row when the lease was lost (another deliverer).
UPDATE push_configs
SET acked_seq = %(seq)s, attempts = 0, last_error = NULL,
    delivered = delivered + %(seq)s - acked_seq,
    next_attempt_at = clock_timestamp() + make_interval(secs => %(lease_s)s)
WHERE task_id = %(task_id)s AND id = %(id)s AND acked_seq = %(from_seq)s - 1
RETURNING (SELECT coalesce(jsonb_agg(jsonb_build_object(
                      'seq', e.seq, 'body', e.body,
                      'age_s', extract(epoch FROM clock_timestamp() - e.at)) ORDER BY e.seq),
                    '[]')
           FROM task_events(%(task_id)s, %(seq)s, %(batch)s) e) AS events

-- name: push_released
UPDATE push_configs SET next_attempt_at = clock_timestamp()
WHERE task_id = %(task_id)s AND id = %(id)s

-- name: push_failed
-- What the receiver took before the failure (up to seq - 1) is acknowledged with it.
UPDATE push_configs
SET acked_seq = %(seq)s - 1, delivered = delivered + %(seq)s - 1 - acked_seq,
    attempts = %(attempts)s, last_error = %(error)s, failures = failures + 1,
    dead_lettered = dead_lettered + CASE WHEN %(dead)s AND state <> 'dead' THEN 1 ELSE 0 END,
    next_attempt_at = clock_timestamp() + make_interval(secs => %(delay_s)s),
    state = CASE WHEN %(dead)s THEN 'dead' ELSE state END
WHERE task_id = %(task_id)s AND id = %(id)s AND acked_seq = %(from_seq)s - 1

-- name: dead_pushes
SELECT task_id, id, url, acked_seq, attempts, delivered, last_error
FROM push_configs WHERE state = 'dead' ORDER BY task_id, id

-- name: retry_pushes
WITH retried AS (
    UPDATE push_configs
    SET state = 'active', attempts = 0, next_attempt_at = clock_timestamp()
    WHERE state = 'dead' AND task_id = %(task_id)s AND (%(id)s::text IS NULL OR id = %(id)s)
    RETURNING task_id, id
)
SELECT id, pg_notify('a2a_push_events', task_id) AS told FROM retried

-- name: lock_signing_keys
-- Held while the first key is made: processes that start together make one between them.
SELECT pg_advisory_xact_lock(hashtext('a2a_agent_signing_keys'))

-- name: add_signing_key
-- The first key only; a later statement in the same transaction sees a key committed by a
-- process that held the lock first.
INSERT INTO signing_keys (kid, private_pem)
SELECT %(kid)s, %(pem)s WHERE NOT EXISTS (SELECT 1 FROM signing_keys)

-- name: signing_keys
SELECT kid, private_pem FROM signing_keys ORDER BY created_at DESC, kid
