-- The run's step results (persistence/steps.py): what a segment's workflow is handed back
-- when it runs again, and how each step's result is kept.

-- name: step_results_of
-- Every step a segment's workflow has recorded, in order.
SELECT step_no, name, result, failure FROM step_results
WHERE task_id = %(task_id)s AND segment = %(segment)s
ORDER BY step_no

-- name: record_step_result
-- One step's result, written only while this execution still owns its DBOS workflow (the
-- owner token DBOS gave it, as DBOS's own step records check) and the workflow is not
-- cancelled; the workflow's row is share-locked until the commit, so a hand-off cannot land
-- between the check and the write. Its commit need not wait for the disk: a row lost with
-- the database's last moments is a step run again, which finds its own records, as after
-- a crash between a step's record and this one; any later commit flushes it with its own.
-- The row already there, if any, comes back as `existing` (the CTE's snapshot is from before
-- the insert).
WITH lazy AS (
    SELECT set_config('synchronous_commit', 'off', true)
), owned AS (
    SELECT w.status, w.owner_xid FROM dbos.workflow_status w, lazy
    WHERE w.workflow_uuid = %(workflow_id)s
    FOR SHARE OF w
), written AS (
    INSERT INTO step_results (task_id, segment, step_no, name, result, failure)
    SELECT %(task_id)s, %(segment)s, %(step_no)s, %(name)s, %(result)s::json, %(failure)s
    FROM owned
    WHERE owned.owner_xid IS NOT DISTINCT FROM %(owner)s AND owned.status <> 'CANCELLED'
    ON CONFLICT (task_id, segment, step_no) DO NOTHING
    RETURNING step_no
)
SELECT (SELECT status FROM owned) AS status,
       (SELECT owner_xid FROM owned) AS owner,
       EXISTS (SELECT 1 FROM written) AS written,
       (SELECT name FROM step_results
        WHERE task_id = %(task_id)s AND segment = %(segment)s AND step_no = %(step_no)s)
           AS existing
