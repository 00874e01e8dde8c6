-- name: insert_model_call
INSERT INTO model_calls (key, task_id, item_id, attempt, purpose, model, stop_reason,
                         input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
VALUES (%(key)s, %(task_id)s, %(item_id)s, %(attempt)s, %(purpose)s, %(model)s, %(stop_reason)s,
        %(input_tokens)s, %(output_tokens)s, %(cache_read_tokens)s, %(cache_write_tokens)s)
ON CONFLICT (key) DO NOTHING

-- name: model_usage
SELECT count(*) AS calls,
       coalesce(sum(input_tokens), 0) AS input_tokens,
       coalesce(sum(output_tokens), 0) AS output_tokens,
       coalesce(sum(cache_read_tokens), 0) AS cache_read_tokens,
       coalesce(sum(cache_write_tokens), 0) AS cache_write_tokens
FROM model_calls WHERE task_id = %(task_id)s

-- name: max_item_position
SELECT coalesce(max(position), -1) AS position FROM items WHERE task_id = %(task_id)s
