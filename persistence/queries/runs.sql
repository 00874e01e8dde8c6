-- The run path: what a step reads as it starts, and the one transaction that records it.

-- name: step_view
-- One statement, one snapshot: the task, its items, the decisions on its requests, the
-- step's effect and (when asked) the budget. The items only when they were written since
-- `items_rev` (the count the caller keeps them at; NULL: it keeps none), and the clocks of
-- those with a time limit, which move while nothing is written. With it, the segment's last
-- step result is kept (`keep_*`, keep_step_result(); all NULL: none waits), whose verdict
-- comes back as `kept_*`: one round trip for both. Always one row: no task, NULL columns.
SELECT k.status AS kept_status, k.owner AS kept_owner, k.written AS kept_written,
       k.existing AS kept_existing,
       t.state, t.goal, t.workspace_fingerprint, t.checkpoint_sha,
       t.report IS NOT NULL AS closed, t.transition_seq, t.segment, t.policy, t.seed,
       t.base_sha, t.owner, t.items_rev,
       CASE WHEN t.items_rev IS DISTINCT FROM %(items_rev)s::bigint
            THEN task_items_json(t.id) END AS items,
       (SELECT jsonb_object_agg(
                   i.item_id, extract(epoch FROM clock_timestamp() - i.started_at)::float8)
        FROM items i
        WHERE i.task_id = t.id AND i.timeout_s IS NOT NULL AND i.started_at IS NOT NULL
              AND t.items_rev IS NOT DISTINCT FROM %(items_rev)s::bigint) AS item_clocks,
       (SELECT jsonb_agg(jsonb_build_object(
                   'id', d.id, 'state', d.state, 'peer', d.peer, 'child_id', d.child_id,
                   'remote_id', d.remote_id, 'remote_state', d.remote_state,
                   'result', d.result, 'item_id', d.item_id, 'goal', d.goal))
        FROM delegations d WHERE d.task_id = t.id) AS delegations,
       (SELECT jsonb_object_agg(p.id, jsonb_build_object(
                   'kind', p.kind, 'decision', p.decision, 'note', p.note,
                   'how', p.decided_how, 'by', p.decided_by, 'segment', p.segment,
                   'item_id', p.item_id, 'details', p.details))
        FROM pauses p WHERE p.task_id = t.id AND p.decision IS NOT NULL) AS decisions,
       (SELECT jsonb_agg(jsonb_build_object(
                   'key', f.key, 'value', f.value, 'source', f.source, 'check', f.check_command,
                   'max_age_s', f.max_age_s,
                   'age_s', extract(epoch FROM clock_timestamp() - f.checked_at)::float8))
        FROM facts f WHERE f.task_id = t.id) AS facts,
       (SELECT jsonb_build_object('key', e.key, 'status', e.status, 'runs', e.runs,
                                  'result', e.result)
        FROM effects e WHERE e.key = %(key)s::text) AS effect,
       CASE WHEN %(budget)s::boolean AND t.id IS NOT NULL
            THEN budget_status(t.id, '') END AS budget
FROM keep_step_result(%(keep_task_id)s, %(keep_segment)s, %(keep_workflow_id)s,
                      %(keep_owner)s, %(keep_step_no)s, %(keep_name)s, %(keep_result)s::json,
                      %(keep_failure)s) AS k
LEFT JOIN tasks t ON t.id = %(task_id)s

-- name: input_files
SELECT name, media_type, filename, size, sha256, body, url
FROM task_files
WHERE task_id = %(task_id)s AND kind = 'input'
ORDER BY name::integer

-- name: trace_context
SELECT trace_context FROM tasks WHERE id = %(task_id)s

-- name: task_state
SELECT state FROM tasks WHERE id = %(task_id)s

-- name: lock_task
SELECT state, transition_seq, event_seq, status_text
FROM tasks
WHERE id = %(task_id)s
FOR UPDATE

-- name: run_counts
-- What a crash cost a run: effects that ran again under their key, and restored workspaces.
SELECT coalesce(sum(runs - 1) FILTER (WHERE runs > 1), 0)::integer AS reruns,
       count(*) FILTER (WHERE runs > 1)::integer AS steps_rerun,
       count(*) FILTER (WHERE step = 'restore')::integer AS restored
FROM effects WHERE task_id = %(task_id)s

-- name: get_transitions
SELECT seq, item_id, attempt, from_state, to_state, reason, at
FROM transitions WHERE task_id = %(task_id)s ORDER BY seq
