-- name: workspace_record
SELECT workspace_fingerprint, checkpoint_sha FROM tasks WHERE id = %(task_id)s

-- name: set_fingerprint
UPDATE tasks SET workspace_fingerprint = %(fingerprint)s WHERE id = %(task_id)s

-- name: add_checkpoint
INSERT INTO checkpoints (task_id, seq, sha, bundle)
SELECT %(task_id)s, coalesce(max(seq), 0) + 1, %(sha)s, %(bundle)s
FROM checkpoints WHERE task_id = %(task_id)s

-- name: set_checkpoint_sha
UPDATE tasks SET checkpoint_sha = %(sha)s WHERE id = %(task_id)s

-- name: get_checkpoints
SELECT seq, sha, bundle FROM checkpoints WHERE task_id = %(task_id)s ORDER BY seq
