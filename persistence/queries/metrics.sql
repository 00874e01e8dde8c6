-- What an operator's monitoring reads (a2a_agent/observe/metrics.py): the whole service's
-- state in one statement, from the rows every process writes.

-- name: metrics
SELECT jsonb_build_object(
    'tasks', (SELECT coalesce(jsonb_object_agg(state, n), '{}'::jsonb)
              FROM (SELECT state, count(*) AS n FROM tasks GROUP BY state) s),
    'items', (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
              FROM (SELECT status, count(*) AS n FROM items GROUP BY status) s),
    'steps', (SELECT coalesce(jsonb_object_agg(step, jsonb_build_object(
                         'completed', completed, 'reruns', reruns, 'seconds', seconds,
                         'buckets', buckets)), '{}'::jsonb)
              FROM (SELECT e.step,
                           count(*) AS completed,
                           coalesce(sum(e.runs - 1) FILTER (WHERE e.runs > 1), 0) AS reruns,
                           coalesce(sum(d.s), 0) AS seconds,
                           (SELECT jsonb_agg(jsonb_build_array(b, (
                                       SELECT count(*) FROM effects x
                                       WHERE x.step = e.step AND x.status = 'completed'
                                         AND extract(epoch FROM x.completed_at - x.started_at)
                                             <= b)) ORDER BY b)
                            FROM unnest(%(buckets)s::float8[]) AS b) AS buckets
                    FROM effects e
                    CROSS JOIN LATERAL (SELECT extract(epoch FROM e.completed_at - e.started_at)
                                               AS s) d
                    WHERE e.status = 'completed'
                    GROUP BY e.step) s),
    'tokens', (SELECT jsonb_build_object(
                   'input', coalesce(sum(input_tokens), 0),
                   'output', coalesce(sum(output_tokens), 0),
                   'cache_read', coalesce(sum(cache_read_tokens), 0),
                   'cache_write', coalesce(sum(cache_write_tokens), 0),
                   'calls', count(*))
               FROM model_calls),
    -- A child run's spending is charged to its parent too (kind `child`): counted once here.
    'usd', (SELECT coalesce(sum(usd), 0) FROM budget_charges
            WHERE kind NOT IN ('reservation', 'child')),
    'budget_stops', (SELECT count(*) FROM tasks
                     WHERE metadata -> 'failure' ->> 'reason' = 'budget_exhausted'),
    'approvals', (SELECT jsonb_build_object(
                      'waiting', count(*),
                      'oldest_s', coalesce(max(extract(epoch FROM clock_timestamp()
                                                                - requested_at)), 0))
                  FROM pauses WHERE decision IS NULL),
    'push', (SELECT jsonb_build_object(
                 'delivered', coalesce(sum(delivered), 0),
                 'active', count(*) FILTER (WHERE state = 'active'),
                 'dead', count(*) FILTER (WHERE state = 'dead'),
                 'retrying', count(*) FILTER (WHERE state = 'active' AND attempts > 0))
             FROM push_configs),
    'outbox', (SELECT coalesce(sum(greatest(t.event_seq - p.acked_seq, 0)), 0)
               FROM push_configs p JOIN tasks t ON t.id = p.task_id
               WHERE p.state = 'active'),
    'workers', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                    'executor', executor_id, 'role', role,
                    'age_s', extract(epoch FROM clock_timestamp() - heartbeat_at))), '[]'::jsonb)
                FROM workers),
    'takeovers', (SELECT jsonb_build_object('count', count(*), 'runs', coalesce(sum(runs), 0))
                  FROM takeovers)
) AS metrics
