-- name: get_checkpoints
SELECT seq, sha, bundle FROM checkpoints WHERE task_id = %(task_id)s ORDER BY seq
