-- name: create_version_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)

-- name: lock_migrations
SELECT pg_advisory_xact_lock(7272001)

-- name: applied_versions
SELECT version FROM schema_migrations ORDER BY version

-- name: record_version
INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s)

-- name: has_tables
SELECT EXISTS (
    SELECT 1 FROM information_schema.tables
    WHERE table_schema = current_schema() AND table_name = 'tasks'
) AS present

-- name: ping
SELECT 1 AS ok

-- name: schema_version
SELECT coalesce(max(version), 0) AS version FROM schema_migrations

-- name: database_exists
SELECT 1 FROM pg_database WHERE datname = %(name)s

-- name: create_functions_table
-- Which version of functions.sql the database runs (one row): a process whose code has an
-- older one refuses to start rather than put its functions back under newer code.
CREATE TABLE IF NOT EXISTS schema_functions (
    only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version    integer NOT NULL,
    sha256     text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)

-- name: functions_version
SELECT version, sha256 FROM schema_functions

-- name: record_functions
INSERT INTO schema_functions (only_row, version, sha256) VALUES (true, %(version)s, %(sha256)s)
ON CONFLICT (only_row) DO UPDATE
SET version = excluded.version, sha256 = excluded.sha256, applied_at = clock_timestamp()

-- name: items_without_view
-- Rows written before items had views (migration 25): a batch at a time, for `migrate` to
-- give each its view (persistence/views.py).
SELECT task_id, jsonb_build_object(
           'item_id', item_id, 'position', position, 'title', title, 'run', run,
           'verify_command', verify_command, 'verify_timeout_s', verify_timeout_s,
           'max_attempts', max_attempts, 'status', status, 'attempts', attempts,
           'evidence', evidence, 'commit_sha', commit_sha, 'failures', failures,
           'history', history, 'run_timeout_s', run_timeout_s, 'timeout_s', timeout_s,
           'irreversible', irreversible, 'ask', ask, 'facts', facts, 'precheck', precheck,
           'verify_independent', verify_independent, 'delegate_to', delegate_to) AS item
FROM items
WHERE view IS NULL
ORDER BY task_id, item_id
LIMIT 500

-- name: set_item_view
UPDATE items SET view = %(view)s::jsonb WHERE task_id = %(task_id)s AND item_id = %(item_id)s
