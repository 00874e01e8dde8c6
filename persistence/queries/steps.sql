-- The run's step results (persistence/steps.py): what a segment's workflow is handed back
-- when it runs again, and how each step's result is kept.

-- name: step_results_of
-- Every step a segment's workflow has recorded, in order.
SELECT step_no, name, result, failure FROM step_results
WHERE task_id = %(task_id)s AND segment = %(segment)s
ORDER BY step_no

-- name: record_step_result
-- One step's result, written only while this execution still owns its DBOS workflow and the
-- workflow is not cancelled (keep_step_result() in functions.sql says how); the name kept at
-- the position before, if any, comes back as `existing`.
SELECT status, owner, written, existing
FROM keep_step_result(%(keep_task_id)s, %(keep_segment)s, %(keep_workflow_id)s,
                      %(keep_owner)s, %(keep_step_no)s, %(keep_name)s, %(keep_result)s::json,
                      %(keep_failure)s)
