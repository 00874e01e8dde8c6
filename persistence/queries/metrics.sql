-- What an operator's monitoring reads (a2a_agent/observe/metrics.py): the whole service's
-- state in one statement, from the rows every process writes. Counters are the live rows plus
-- what deletes folded into metric_totals (functions.sql), so retention never makes one drop.

-- name: metrics
WITH steps AS (
    SELECT e.step, metric_step_bucket(d.s) AS bucket, count(*) AS n,
           sum(e.runs - 1) AS reruns, sum(d.s) AS seconds
    FROM effects e
    CROSS JOIN LATERAL (SELECT extract(epoch FROM e.completed_at - e.started_at)::float8 AS s) d
    WHERE e.status = 'completed'
    GROUP BY 1, 2
), live (name, label, value) AS (
    SELECT 'steps', step, sum(n)::float8 FROM steps GROUP BY step
    UNION ALL SELECT 'step_reruns', step, sum(reruns)::float8 FROM steps GROUP BY step
    UNION ALL SELECT 'step_seconds', step, sum(seconds) FROM steps GROUP BY step
    UNION ALL SELECT 'step_bucket', step || ' ' || bucket, n::float8 FROM steps
    UNION ALL SELECT x.name, x.label, x.value
    FROM (SELECT count(*) AS calls, coalesce(sum(input_tokens), 0) AS i,
                 coalesce(sum(output_tokens), 0) AS o, coalesce(sum(cache_read_tokens), 0) AS cr,
                 coalesce(sum(cache_write_tokens), 0) AS cw
          FROM model_calls) m
    CROSS JOIN LATERAL (VALUES ('model_calls', '', m.calls::float8),
                               ('tokens', 'input', m.i::float8), ('tokens', 'output', m.o::float8),
                               ('tokens', 'cache_read', m.cr::float8),
                               ('tokens', 'cache_write', m.cw::float8)) AS x(name, label, value)
    -- A child run's spending is charged to its parent too (kind `child`): counted once here.
    UNION ALL SELECT 'usd', '', coalesce(sum(usd), 0)::float8 FROM budget_charges
    WHERE kind NOT IN ('reservation', 'child')
    UNION ALL SELECT 'budget_stops', '', count(*)::float8 FROM tasks
    WHERE metadata -> 'failure' ->> 'reason' = 'budget_exhausted'
    UNION ALL SELECT x.name, x.label, x.value
    FROM (SELECT coalesce(sum(delivered), 0) AS d, coalesce(sum(failures), 0) AS f,
                 coalesce(sum(dead_lettered), 0) AS dl FROM push_configs) p
    CROSS JOIN LATERAL (VALUES ('push', 'delivered', p.d::float8), ('push', 'failed', p.f::float8),
                               ('push', 'dead_lettered', p.dl::float8)) AS x(name, label, value)
    UNION ALL SELECT 'takeovers', '', count(*)::float8 FROM takeovers
    UNION ALL SELECT 'takeover_runs', '', coalesce(sum(runs), 0)::float8 FROM takeovers
), counters AS (
    SELECT name, label, sum(value) AS value
    FROM (SELECT * FROM live UNION ALL SELECT name, label, value FROM metric_totals) c
    GROUP BY 1, 2
)
SELECT jsonb_build_object(
    'counters', (SELECT coalesce(jsonb_object_agg(name, labels), '{}'::jsonb)
                 FROM (SELECT name, jsonb_object_agg(label, value) AS labels
                       FROM counters GROUP BY name) n),
    'step_bounds', to_jsonb(metric_step_bounds()),
    'tasks', (SELECT coalesce(jsonb_object_agg(state, n), '{}'::jsonb)
              FROM (SELECT state, count(*) AS n FROM tasks GROUP BY state) s),
    'items', (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
              FROM (SELECT status, count(*) AS n FROM items GROUP BY status) s),
    'approvals', (SELECT jsonb_build_object(
                      'waiting', count(*),
                      'oldest_s', coalesce(max(extract(epoch FROM clock_timestamp()
                                                                - requested_at)), 0))
                  FROM pauses WHERE decision IS NULL),
    'push', (SELECT jsonb_build_object(
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
                FROM workers)
) AS metrics
