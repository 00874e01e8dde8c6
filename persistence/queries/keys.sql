-- API keys (a2a-agent keys create|list|revoke, and the edge's check of each request).

-- name: create_key
INSERT INTO api_keys (id, principal, name, scopes, secret_hash)
VALUES (%(id)s, %(principal)s, %(name)s, %(scopes)s, %(secret_hash)s)

-- name: create_first_key
-- The admin key of a fresh installation: only if no key was ever made (two processes
-- starting at once make one between them).
INSERT INTO api_keys (id, principal, name, scopes, secret_hash)
SELECT %(id)s, %(principal)s, %(name)s, %(scopes)s, %(secret_hash)s
WHERE NOT EXISTS (SELECT 1 FROM api_keys)
  AND pg_try_advisory_xact_lock(hashtext('a2a_agent_first_key'))
RETURNING id

-- name: key_by_id
SELECT id, principal, name, scopes, secret_hash, revoked_at IS NOT NULL AS revoked
FROM api_keys WHERE id = %(id)s

-- name: list_keys
SELECT id, principal, name, scopes, created_at, revoked_at
FROM api_keys ORDER BY created_at, id

-- name: revoke_key
UPDATE api_keys SET revoked_at = clock_timestamp()
WHERE id = %(id)s AND revoked_at IS NULL
RETURNING id
