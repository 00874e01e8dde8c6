-- name: insert_model_call
INSERT INTO model_calls (key, task_id, item_id, attempt, purpose, model, stop_reason,
                         input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
VALUES (%(key)s, %(task_id)s, %(item_id)s, %(attempt)s, %(purpose)s, %(model)s, %(stop_reason)s,
        %(input_tokens)s, %(output_tokens)s, %(cache_read_tokens)s, %(cache_write_tokens)s)
ON CONFLICT (key) DO NOTHING
