-- SQL functions, applied with CREATE OR REPLACE after the migrations on every `migrate`
-- (fresh install and upgrade alike): change a function here, without a numbered migration.
-- A change of a function's arguments or result type needs a DROP in a migration first.
--
-- PL/pgSQL, not LANGUAGE sql: a multi-statement SQL function is planned again on every call
-- (0.73 ms for budget_status here), a PL/pgSQL one keeps its plan per session (0.31 ms).

-- A task's budget, per dimension: used (what its steps were charged), reserved (spending on
-- record but not charged yet: reservations) and limit. The sums are budget_totals' (kept as
-- charges are written: keep_budget_totals below), not the ledger's, so a step of a long run
-- reads one row, not every charge of it.
-- `p_exclude_key` leaves out one step's own reservation when that step checks before spending.
CREATE OR REPLACE FUNCTION budget_status(p_task_id text, p_exclude_key text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_task record;
    v_sum budget_totals;
    v_own budget_charges;
    v_last_done timestamptz;
    v_steps bigint;
BEGIN
    SELECT id, budget, extract(epoch FROM clock_timestamp() - created_at) AS age,
           waited_s
           + CASE WHEN state = 'input_required'
                  THEN extract(epoch FROM clock_timestamp() - status_at) ELSE 0 END
           AS waited_s
    INTO v_task FROM tasks WHERE id = p_task_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_sum FROM budget_totals WHERE task_id = p_task_id;
    SELECT * INTO v_own FROM budget_charges WHERE key = p_exclude_key AND task_id = p_task_id;
    -- Steps without progress: charged after the last item was done (its index: migration 29).
    v_last_done := (SELECT max(at) FROM transitions WHERE task_id = p_task_id AND to_state = 'done');
    SELECT count(*) INTO v_steps FROM budget_charges
    WHERE task_id = p_task_id AND key <> p_exclude_key AND kind NOT IN ('reservation', 'child')
          AND at > coalesce(v_last_done, '-infinity'::timestamptz);
    RETURN budget_json(
        v_task.budget, v_task.age, v_task.waited_s, v_sum, v_own, v_steps,
        (SELECT coalesce(jsonb_agg(dimension || ':' || threshold), '[]'::jsonb)
         FROM budget_alerts WHERE task_id = p_task_id));
END
$$;

-- What budget_status() says, from what it read: the limits (`p_budget`), the task's age and
-- time waited for people in seconds, its charges summed (`p_sum`), the step's own charge
-- left out (`p_own`), the steps without progress and the alerts. create_task() says it of a
-- new task from its limits alone (nothing charged, no age), without reading its row back.
CREATE OR REPLACE FUNCTION budget_json(
    p_budget jsonb, p_age numeric, p_waited double precision, p_sum budget_totals,
    p_own budget_charges, p_steps bigint, p_alerts jsonb
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_reserved boolean := p_own.kind = 'reservation';
BEGIN
    RETURN jsonb_build_object(
        'usd', jsonb_build_object(
            'used', round(coalesce(p_sum.usd, 0)
                          - CASE WHEN v_reserved IS FALSE THEN p_own.usd ELSE 0 END, 6),
            'reserved', round(coalesce(p_sum.usd_reserved, 0)
                              - CASE WHEN v_reserved THEN p_own.usd ELSE 0 END, 6),
            'limit', p_budget -> 'max_usd'),
        'tokens', jsonb_build_object(
            'used', coalesce(p_sum.tokens, 0)
                    - CASE WHEN v_reserved IS FALSE THEN p_own.tokens ELSE 0 END,
            'reserved', coalesce(p_sum.tokens_reserved, 0)
                        - CASE WHEN v_reserved THEN p_own.tokens ELSE 0 END,
            'limit', p_budget -> 'max_tokens'),
        -- Wall time is the run's own: time spent waiting for a person is not counted (the
        -- age is, against the server's maximum run age).
        'wall_s', jsonb_build_object(
            'used', round((p_age - p_waited)::numeric, 1),
            'waited', round(p_waited::numeric, 1),
            'age', round(p_age, 1),
            'limit', p_budget -> 'max_wall_s'),
        'steps_without_progress', jsonb_build_object(
            'used', p_steps, 'limit', p_budget -> 'max_steps_without_progress'),
        'actions', jsonb_build_object(
            'used', coalesce(p_sum.actions, 0) - coalesce(p_own.actions, 0),
            'limit', p_budget -> 'max_actions' -> '*'),
        'actions_by_tool', (
            SELECT coalesce(jsonb_object_agg(t.tool, jsonb_build_object(
                       'used', t.used, 'limit', p_budget -> 'max_actions' -> t.tool)),
                       '{}'::jsonb)
            FROM (SELECT n.key AS tool,
                         n.value::bigint - CASE WHEN n.key = p_own.tool THEN p_own.actions
                                                ELSE 0 END AS used
                  FROM jsonb_each_text(coalesce(p_sum.by_tool, '{}'::jsonb)) AS n) AS t
            WHERE t.used <> 0),
        'limits', p_budget,
        'alerts', p_alerts);
END
$$;

-- budget_totals as each charge is written, changed or removed: what budget_status() sums.
CREATE OR REPLACE FUNCTION keep_budget_totals() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE budget_totals AS b
        SET tokens = b.tokens - CASE WHEN OLD.kind <> 'reservation' THEN OLD.tokens ELSE 0 END,
            usd = b.usd - CASE WHEN OLD.kind <> 'reservation' THEN OLD.usd ELSE 0 END,
            tokens_reserved = b.tokens_reserved
                              - CASE WHEN OLD.kind = 'reservation' THEN OLD.tokens ELSE 0 END,
            usd_reserved = b.usd_reserved
                           - CASE WHEN OLD.kind = 'reservation' THEN OLD.usd ELSE 0 END,
            actions = b.actions - OLD.actions,
            by_tool = CASE WHEN OLD.tool IS NULL THEN b.by_tool
                           ELSE b.by_tool || jsonb_build_object(OLD.tool,
                               coalesce((b.by_tool ->> OLD.tool)::bigint, 0) - OLD.actions) END
        WHERE b.task_id = OLD.task_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO budget_totals AS b (task_id, tokens, usd, tokens_reserved, usd_reserved,
                                        actions, by_tool)
        VALUES (NEW.task_id,
                CASE WHEN NEW.kind <> 'reservation' THEN NEW.tokens ELSE 0 END,
                CASE WHEN NEW.kind <> 'reservation' THEN NEW.usd ELSE 0 END,
                CASE WHEN NEW.kind = 'reservation' THEN NEW.tokens ELSE 0 END,
                CASE WHEN NEW.kind = 'reservation' THEN NEW.usd ELSE 0 END,
                NEW.actions,
                CASE WHEN NEW.tool IS NULL THEN '{}'::jsonb
                     ELSE jsonb_build_object(NEW.tool, NEW.actions) END)
        ON CONFLICT (task_id) DO UPDATE
        SET tokens = b.tokens + excluded.tokens, usd = b.usd + excluded.usd,
            tokens_reserved = b.tokens_reserved + excluded.tokens_reserved,
            usd_reserved = b.usd_reserved + excluded.usd_reserved,
            actions = b.actions + excluded.actions,
            by_tool = CASE WHEN NEW.tool IS NULL THEN b.by_tool
                           ELSE b.by_tool || jsonb_build_object(NEW.tool,
                               coalesce((b.by_tool ->> NEW.tool)::bigint, 0) + NEW.actions) END;
    END IF;
    RETURN NULL;
END
$$;

-- A task's items as the JSON the store turns into ItemRow.
CREATE OR REPLACE FUNCTION task_items_json(p_task_id text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'item_id', i.item_id, 'position', i.position, 'title', i.title,
                   'run', i.run, 'verify_command', i.verify_command,
                   'verify_timeout_s', i.verify_timeout_s, 'max_attempts', i.max_attempts,
                   'status', i.status, 'attempts', i.attempts, 'evidence', i.evidence,
                   'commit_sha', i.commit_sha, 'failures', i.failures,
                   'history', i.history, 'run_timeout_s', i.run_timeout_s,
                   'timeout_s', i.timeout_s, 'irreversible', i.irreversible, 'ask', i.ask,
                   'facts', i.facts, 'precheck', i.precheck,
                   'verify_independent', i.verify_independent, 'delegate_to', i.delegate_to,
                   'elapsed_s', extract(epoch FROM clock_timestamp() - i.started_at)::float8)
                   ORDER BY i.position),
               '[]'::jsonb)
        FROM items i WHERE i.task_id = p_task_id
    );
END
$$;

-- A call in the shape of functions before version 4 (an item change as a patch, no views, no
-- `summary`): a process of older code still running in a roll. It is refused with SQLSTATE
-- 57000, which that code takes for a database outage: it retries the step (about four
-- minutes) until it is replaced, and the new process runs the step again; nothing is written.
CREATE OR REPLACE FUNCTION refuse_older_code(p_function text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = '57000',
        MESSAGE = format('%s: called by a2a-agent code older than the database''s SQL '
                         'functions (see schema_functions); replace this process with the new '
                         'release (its runs resume there)', p_function);
END
$$;

-- Items written as persistence/views.py made them (a submission's, a model's plan's): each
-- row whole, with its view. p_items: [{item_id, position, title, run, verify_command,
-- verify_timeout_s, max_attempts, run_timeout_s, timeout_s, irreversible, ask, facts,
-- precheck, verify_independent, delegate_to, status, attempts, evidence, commit_sha,
-- failures, history, view}].
CREATE OR REPLACE FUNCTION insert_items(p_task_id text, p_items jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO items (task_id, position, item_id, title, run, verify_command,
                       verify_timeout_s, max_attempts, run_timeout_s, timeout_s, irreversible,
                       ask, facts, precheck, verify_independent, delegate_to, status, attempts,
                       evidence, commit_sha, failures, history, view)
    SELECT p_task_id, (n.x ->> 'position')::integer, n.x ->> 'item_id', n.x ->> 'title',
           n.x ->> 'run', n.x ->> 'verify_command', (n.x ->> 'verify_timeout_s')::integer,
           (n.x ->> 'max_attempts')::integer, (n.x ->> 'run_timeout_s')::integer,
           (n.x ->> 'timeout_s')::integer, (n.x ->> 'irreversible')::boolean, n.x ->> 'ask',
           n.x -> 'facts', (n.x ->> 'precheck')::boolean,
           (n.x ->> 'verify_independent')::boolean,
           nullif(n.x -> 'delegate_to', 'null'::jsonb), n.x ->> 'status',
           (n.x ->> 'attempts')::integer, nullif(n.x -> 'evidence', 'null'::jsonb),
           n.x ->> 'commit_sha', (n.x ->> 'failures')::integer, n.x -> 'history', n.x -> 'view'
    FROM jsonb_array_elements(p_items) WITH ORDINALITY AS n (x, ord);
END
$$;

-- The plan artifact: the goal, each item's view with its history in plan order, and the
-- requests asked (`decisions`). apply_task_change() makes it from the stored rows,
-- create_task() from the items it is given.
CREATE OR REPLACE FUNCTION plan_artifact(p_goal text, p_items jsonb, p_decisions jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN jsonb_build_object('goal', p_goal, 'items', p_items, 'decisions', p_decisions);
END
$$;

-- How far apart plan events hold the plan whole (in event numbers): between them, an event
-- holds only the items a step changed, and a reader applies at most this many to the last
-- whole one (task_events()).
CREATE OR REPLACE FUNCTION plan_full_every() RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN 16;
END
$$;

-- The plan with `p_changes` ([{index, id, item}]: each changed item where the plan has it)
-- applied; apply_task_change() checked that each is where the plan has its id.
CREATE OR REPLACE FUNCTION plan_with_changes(p_plan jsonb, p_changes jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_plan jsonb := p_plan;
    v_entry jsonb;
BEGIN
    FOR v_entry IN SELECT value FROM jsonb_array_elements(p_changes) LOOP
        v_plan := jsonb_set(v_plan, ARRAY['items', v_entry ->> 'index'], v_entry -> 'item');
    END LOOP;
    RETURN v_plan;
END
$$;

-- The plan as of plan event p_seq: its own if it holds it whole, else the whole one it
-- builds on with every change from there to it applied.
CREATE OR REPLACE FUNCTION plan_as_of(p_task_id text, p_seq integer) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_body jsonb;
    v_plan jsonb;
    v_changes jsonb;
BEGIN
    SELECT body INTO v_body FROM events WHERE task_id = p_task_id AND seq = p_seq;
    IF v_body ->> 'kind' IS DISTINCT FROM 'plan_changes' THEN
        RETURN v_body -> 'data';
    END IF;
    SELECT body -> 'data' INTO v_plan
    FROM events WHERE task_id = p_task_id AND seq = (v_body ->> 'base')::integer;
    FOR v_changes IN
        SELECT body -> 'changes' FROM events
        WHERE task_id = p_task_id AND seq > (v_body ->> 'base')::integer AND seq <= p_seq
              AND body ->> 'kind' = 'plan_changes'
        ORDER BY seq
    LOOP
        v_plan := plan_with_changes(v_plan, v_changes);
    END LOOP;
    RETURN v_plan;
END
$$;

-- A stored event as readers take it: a plan event that holds only its changes, whole. Such
-- an event is of a kind of its own (`plan_changes`), which code that predates it skips (a
-- process of the release before, still serving in a roll, leaves out a plan update).
CREATE OR REPLACE FUNCTION event_body(p_task_id text, p_seq integer, p_body jsonb)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_body ->> 'kind' IS DISTINCT FROM 'plan_changes' THEN
        RETURN p_body;
    END IF;
    RETURN jsonb_build_object('kind', 'artifact', 'name', 'plan',
                              'data', plan_as_of(p_task_id, p_seq));
END
$$;

-- A task's events after p_after, at most p_limit (NULL: all), in order, as readers take them
-- (streams, push deliveries): each plan event with the plan whole as of it. The plan is
-- built once for the first that holds only its changes and carried on from there; the
-- task's latest is its row's plan. STABLE: one snapshot, so the row and the events agree.
CREATE OR REPLACE FUNCTION task_events(p_task_id text, p_after integer, p_limit integer)
RETURNS TABLE (seq integer, body jsonb, at timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_event record;
    v_plan jsonb;
    v_carried boolean := false;  -- v_plan is the plan as of the last plan event returned
    v_latest integer;
    v_latest_plan jsonb;
BEGIN
    SELECT t.plan_seq, t.plan INTO v_latest, v_latest_plan FROM tasks t WHERE t.id = p_task_id;
    FOR v_event IN
        SELECT e.seq, e.body, e.at FROM events e
        WHERE e.task_id = p_task_id AND e.seq > p_after
        ORDER BY e.seq
        LIMIT p_limit
    LOOP
        seq := v_event.seq;
        at := v_event.at;
        body := v_event.body;
        IF v_event.body ->> 'kind' = 'plan_changes' THEN
            IF v_event.seq = v_latest THEN
                v_plan := v_latest_plan;
            ELSIF v_carried THEN
                v_plan := plan_with_changes(v_plan, v_event.body -> 'changes');
            ELSE
                v_plan := plan_as_of(p_task_id, v_event.seq);
            END IF;
            v_carried := true;
            body := jsonb_build_object('kind', 'artifact', 'name', 'plan', 'data', v_plan);
        ELSIF v_event.body ->> 'kind' = 'artifact' AND v_event.body ->> 'name' = 'plan' THEN
            v_plan := v_event.body -> 'data';
            v_carried := true;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

-- A change's transitions (`p_change -> 'transitions'`), numbered after p_seq; returns the
-- last number.
CREATE OR REPLACE FUNCTION insert_transitions(p_task_id text, p_seq integer, p_change jsonb)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_transition jsonb;
    v_seq integer := p_seq;
BEGIN
    FOR v_transition IN
        SELECT value FROM jsonb_array_elements(coalesce(p_change -> 'transitions', '[]'::jsonb))
    LOOP
        v_seq := v_seq + 1;
        INSERT INTO transitions (task_id, seq, item_id, attempt, from_state, to_state, reason, at)
        VALUES (p_task_id, v_seq, v_transition ->> 'item_id',
                (v_transition ->> 'attempt')::integer, v_transition ->> 'from_state',
                v_transition ->> 'to_state', v_transition ->> 'reason',
                coalesce((v_transition ->> 'at')::timestamptz, clock_timestamp()));
    END LOOP;
    RETURN v_seq;
END
$$;

-- The stream events of a change as the task row now says it: the plan artifact, the report
-- artifact and the status, each at its number (NULL: not part of this change).
CREATE OR REPLACE FUNCTION insert_task_events(
    p_task_id text, p_plan_seq integer, p_report_seq integer, p_status_seq integer
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- One INSERT of up to three rows; each body is built (the plan's read whole) only when
    -- its event is written, so a NULL sequence number costs nothing. (plpgsql: its plan is
    -- kept by the session, where a SQL function's is made again each call.)
    INSERT INTO events (task_id, seq, body)
    SELECT t.id, e.seq, e.body
    FROM tasks t
    CROSS JOIN LATERAL (VALUES
        (p_plan_seq, CASE WHEN p_plan_seq IS NOT NULL THEN
            jsonb_build_object('kind', 'artifact', 'name', 'plan', 'data', t.plan) END),
        (p_report_seq, CASE WHEN p_report_seq IS NOT NULL THEN
            jsonb_build_object('kind', 'artifact', 'name', 'report', 'data', t.report) END),
        (p_status_seq, CASE WHEN p_status_seq IS NOT NULL THEN
            jsonb_build_object('kind', 'status', 'state', t.state, 'text', t.status_text,
                               'at', t.status_at, 'data', t.status_data) END)
    ) AS e (seq, body)
    WHERE t.id = p_task_id AND e.seq IS NOT NULL;
END
$$;

-- Every change to a task, written in its transaction: transitions numbered from p_seq, the
-- task row in one UPDATE (its status when a state is given, counters, workspace record,
-- report, metadata patch, and what is derived from the rows, so that a read never
-- disagrees with them: the plan artifact assembled from the items' stored views and
-- histories and the pauses' decisions, metadata.budget from the budget ledger), the stream
-- events numbered from p_event_seq, and the NOTIFY that wakes streams and drops cached rows.
-- metadata.progress and metadata.verification are the `summary` the caller computed from the
-- items (persistence/views.py: plan_summary), stored as given.
-- p_change: {transitions: [{item_id, attempt, from_state, to_state, reason, at}], state,
-- status_text, items_changed, plan_items, summary, charged, report, fingerprint,
-- checkpoint_sha, metadata_patch, policy_patch, closing_segment}.
CREATE OR REPLACE FUNCTION apply_task_change(
    p_task_id text, p_change jsonb, p_seq integer, p_event_seq integer
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_seq integer;
    v_event integer := p_event_seq;
    v_state text := p_change ->> 'state';
    v_items_changed boolean := coalesce((p_change ->> 'items_changed')::boolean, false);
    v_items_written boolean := v_items_changed;
    -- The items a step changed in place, each {index, id, item} (record_step): the plan
    -- artifact takes them where they stand instead of being assembled from every item.
    v_plan_items jsonb := nullif(p_change -> 'plan_items', 'null'::jsonb);
    v_plan jsonb;
    -- The plan event's number that holds the plan whole, which this change's event (only
    -- the items it changed) builds on; NULL: this change's event holds it whole.
    v_plan_base integer;
    v_entry jsonb;
    v_charged boolean := coalesce((p_change ->> 'charged')::boolean, false);
    v_report jsonb := nullif(p_change -> 'report', 'null'::jsonb);
    v_plan_seq integer;
    v_report_seq integer;
    v_outputs_seq integer;
    v_status_seq integer;
    v_was text;
    v_parent text;
BEGIN
    SELECT state INTO v_was FROM tasks WHERE id = p_task_id;
    IF v_was = 'input_required' AND v_state IS NOT NULL AND v_state <> 'input_required' THEN
        -- The wait ends (a reply, an expiry, a cancel): its time is not the run's, and the
        -- next workflow segment is numbered now, so whoever starts it starts the same one.
        UPDATE pauses
        SET decision = 'ended', decided_how = 'ended', decided_at = clock_timestamp(),
            note = 'the task ended while it waited'
        WHERE task_id = p_task_id AND decision IS NULL;
        UPDATE tasks
        SET waited_s = waited_s + extract(epoch FROM clock_timestamp() - status_at),
            segment = segment + 1
        WHERE id = p_task_id;
    ELSIF v_state IN ('completed', 'failed', 'canceled', 'rejected')
          AND (coalesce((p_change ->> 'closing_segment')::boolean, false)
               OR (v_was = 'working' AND EXISTS (
                       SELECT 1 FROM delegations
                       WHERE task_id = p_task_id AND state = 'pending')))
    THEN
        -- No segment of it runs (it waited on a delegate, or the engine ended its run): the
        -- one that closes its record (and cancels its delegates) is numbered now, for
        -- whoever ends it to start.
        UPDATE tasks SET segment = segment + 1 WHERE id = p_task_id;
    END IF;
    -- A request asked or decided shows in the plan artifact (its `decisions`).
    IF v_state IS NOT NULL AND 'input_required' IN (v_state, v_was) THEN
        v_items_changed := true;
        v_plan_items := NULL;  -- the decisions change: the plan is assembled anew
    END IF;
    IF v_items_changed AND v_plan_items IS NOT NULL THEN
        -- Each changed item where the plan has it; the plan is assembled anew if one is not
        -- found there (no plan yet, or another order).
        SELECT plan, plan_full_seq INTO v_plan, v_plan_base FROM tasks WHERE id = p_task_id;
        FOR v_entry IN SELECT value FROM jsonb_array_elements(v_plan_items) LOOP
            IF v_plan -> 'items' -> ((v_entry ->> 'index')::integer) ->> 'id'
               IS DISTINCT FROM v_entry ->> 'id' THEN
                v_plan := NULL;
                v_plan_base := NULL;
                EXIT;
            END IF;
        END LOOP;
        v_plan := plan_with_changes(v_plan, v_plan_items);
    END IF;
    v_seq := insert_transitions(p_task_id, p_seq, p_change);
    IF v_items_changed THEN
        v_event := v_event + 1;
        v_plan_seq := v_event;
        IF v_plan IS NULL OR v_plan_seq - v_plan_base >= plan_full_every() THEN
            v_plan_base := NULL;  -- assembled anew, or a long way from the last whole one
        END IF;
    ELSE
        v_plan_base := NULL;
    END IF;
    IF v_report IS NOT NULL THEN
        v_event := v_event + 1;
        v_report_seq := v_event;
        -- The run's results (its diff, bundle, files changed): an artifact event each.
        v_outputs_seq := v_event;
        v_event := v_event + jsonb_array_length(coalesce(v_report -> 'outputs', '[]'::jsonb));
    END IF;
    IF v_state IS NOT NULL THEN
        v_event := v_event + 1;
        v_status_seq := v_event;
    END IF;
    UPDATE tasks t
    SET state = coalesce(v_state, t.state),
        status_text = CASE WHEN v_state IS NULL THEN t.status_text
                           ELSE p_change ->> 'status_text' END,
        status_at = CASE WHEN v_state IS NULL THEN t.status_at ELSE clock_timestamp() END,
        status_data = CASE WHEN v_state IS NULL THEN t.status_data
                           ELSE nullif(p_change -> 'status_data', 'null'::jsonb) END,
        transition_seq = v_seq,
        event_seq = v_event,
        -- Every write of the items (record_step's) is counted: a worker's kept items are
        -- good while the count is the one it recorded (persistence/kept.py).
        items_rev = t.items_rev + CASE WHEN v_items_written THEN 1 ELSE 0 END,
        workspace_fingerprint = coalesce(p_change ->> 'fingerprint', t.workspace_fingerprint),
        checkpoint_sha = coalesce(p_change ->> 'checkpoint_sha', t.checkpoint_sha),
        report = coalesce(v_report, t.report),
        plan = CASE WHEN NOT v_items_changed THEN t.plan
                    WHEN v_plan IS NOT NULL THEN v_plan
                    WHEN s.items_total = 0 THEN NULL ELSE s.plan END,
        plan_seq = coalesce(v_plan_seq, t.plan_seq),
        plan_full_seq = CASE WHEN v_plan_seq IS NULL OR v_plan_base IS NOT NULL
                             THEN t.plan_full_seq ELSE v_plan_seq END,
        metadata = t.metadata
            || coalesce(nullif(p_change -> 'summary', 'null'::jsonb), '{}'::jsonb)
            || CASE WHEN v_charged THEN jsonb_build_object('budget', budget_status(t.id, ''))
                    ELSE '{}'::jsonb END
            || coalesce(nullif(p_change -> 'metadata_patch', 'null'::jsonb), '{}'::jsonb),
        policy = t.policy
            || coalesce(nullif(p_change -> 'policy_patch', 'null'::jsonb), '{}'::jsonb),
        base_sha = coalesce(p_change ->> 'base_sha', t.base_sha),
        seed = CASE WHEN p_change -> 'seed_patch' IS NULL
                         OR p_change -> 'seed_patch' = 'null'::jsonb THEN t.seed
                    ELSE coalesce(t.seed, '{}'::jsonb) || (p_change -> 'seed_patch') END,
        updated_at = clock_timestamp()
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (
        SELECT count(i.item_id) AS items_total,
               plan_artifact(
                   t2.goal,
                   coalesce(jsonb_agg(
                       i.view || jsonb_build_object('history', i.history) ORDER BY i.position)
                       FILTER (WHERE i.item_id IS NOT NULL), '[]'::jsonb),
                   (
                       SELECT coalesce(jsonb_agg(jsonb_build_object(
                                  'id', p.id, 'kind', p.kind, 'item', p.item_id,
                                  'summary', p.summary, 'options', p.options,
                                  'status', CASE WHEN p.decision IS NULL THEN 'pending'
                                                 ELSE 'decided' END,
                                  'decision', p.decision, 'note', p.note,
                                  'decided_by', p.decided_by, 'how', p.decided_how,
                                  'requested_at', p.requested_at, 'decided_at', p.decided_at,
                                  'expires_at', p.expires_at) ORDER BY p.requested_at),
                              '[]'::jsonb)
                       FROM pauses p WHERE p.task_id = p_task_id)) AS plan
        FROM tasks t2 LEFT JOIN items i ON i.task_id = t2.id
        WHERE t2.id = p_task_id
        GROUP BY t2.id, t2.goal
    ) AS s ON v_items_changed AND v_plan IS NULL
    WHERE t.id = p_task_id
    RETURNING t.parent_id INTO v_parent;
    IF v_event <> p_event_seq THEN
        IF v_plan_base IS NOT NULL THEN
            -- The items changed in place: their event holds them alone (task_events()).
            INSERT INTO events (task_id, seq, body)
            VALUES (p_task_id, v_plan_seq,
                    jsonb_build_object('kind', 'plan_changes', 'base', v_plan_base,
                                       'changes', v_plan_items));
            v_plan_seq := NULL;
        END IF;
        PERFORM insert_task_events(p_task_id, v_plan_seq, v_report_seq, v_status_seq);
        INSERT INTO events (task_id, seq, body)
        SELECT p_task_id, v_outputs_seq + o.n,
               jsonb_build_object('kind', 'artifact', 'name', o.x ->> 'name', 'data', o.x)
        FROM jsonb_array_elements(coalesce(v_report -> 'outputs', '[]'::jsonb))
             WITH ORDINALITY AS o (x, n)
        WHERE v_report IS NOT NULL;
    END IF;
    PERFORM pg_notify('a2a_task_events', p_task_id);
    IF v_event <> p_event_seq
       AND EXISTS (SELECT 1 FROM push_configs WHERE task_id = p_task_id AND state = 'active')
    THEN
        -- New events for a receiver: the deliverers' own channel (persistence/notify.py).
        PERFORM pg_notify('a2a_push_events', p_task_id);
    END IF;
    IF v_parent IS NOT NULL THEN
        -- A child run: what it asks, and how it ended, shows on its parent.
        PERFORM mirror_to_parent(p_task_id);
    END IF;
END
$$;

-- One checkpointed step, recorded in one statement (so in one round trip, with its commit).
-- p_step is a StepRecord as JSON (persistence/runs.py); p_bundle its checkpoint's bundle.
-- Locks the task; a step already recorded under its effect key writes nothing and gets the
-- recorded result back; on a terminal task only the effect and its charge are kept, unless
-- the step is the run's closing (`closing`: its report, final entry and checkpoint).
-- The items it changes or adds come whole, with their views, and the plan's `summary`
-- (persistence/views.py: items_after).
-- Returns {replayed, state, result, items_rev (when it wrote items), transitions}; replayed,
-- {replayed, state, result, items}.
CREATE OR REPLACE FUNCTION record_step(p_task_id text, p_step jsonb, p_bundle bytea)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_locked record;
    v_key text := p_step ->> 'effect_key';
    v_effect_status text;
    v_effect_result jsonb;
    v_item jsonb := nullif(p_step -> 'item', 'null'::jsonb);
    v_new_items jsonb := coalesce(nullif(p_step -> 'new_items', 'null'::jsonb), '[]'::jsonb);
    v_charge jsonb := nullif(p_step -> 'charge', 'null'::jsonb);
    v_call jsonb := nullif(p_step -> 'model_call', 'null'::jsonb);
    v_then jsonb := nullif(p_step -> 'then', 'null'::jsonb);
    v_changed integer := 0;
    v_terminal boolean;
    v_closing boolean := coalesce((p_step ->> 'closing')::boolean, false);
    v_pause jsonb := nullif(p_step -> 'pause', 'null'::jsonb);
    v_status_data jsonb;
    v_facts jsonb := coalesce(nullif(p_step -> 'facts', 'null'::jsonb), '[]'::jsonb);
    v_patch jsonb := nullif(p_step -> 'metadata_patch', 'null'::jsonb);
    v_delegation jsonb := nullif(p_step -> 'delegation', 'null'::jsonb);
    v_position integer;
    v_plan_items jsonb := '[]'::jsonb;
BEGIN
    IF NOT p_step ? 'summary' THEN
        PERFORM refuse_older_code('record_step');
    END IF;
    SELECT state, transition_seq, event_seq, status_text INTO v_locked
    FROM tasks WHERE id = p_task_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT status, result INTO v_effect_status, v_effect_result FROM effects WHERE key = v_key;
    IF v_effect_status = 'completed' THEN
        RETURN jsonb_build_object('replayed', true, 'state', v_locked.state,
                                  'result', v_effect_result,
                                  'items', task_items_json(p_task_id));
    END IF;
    IF v_charge IS NOT NULL THEN
        -- Charged no later than the step's own transitions (timed by the harness before it
        -- recorded them): the step that finishes an item is not a step without progress.
        INSERT INTO budget_charges (key, task_id, kind, tool, tokens, usd, actions, at)
        VALUES (v_key, p_task_id, v_charge ->> 'kind', v_charge ->> 'tool',
                (v_charge ->> 'tokens')::bigint, (v_charge ->> 'usd')::numeric,
                (v_charge ->> 'actions')::integer,
                least(clock_timestamp(),
                      (SELECT min((x ->> 'at')::timestamptz)
                       FROM jsonb_array_elements(coalesce(p_step -> 'transitions', '[]'::jsonb))
                            AS x)))
        ON CONFLICT (key) DO UPDATE
        SET kind = excluded.kind, tool = excluded.tool, tokens = excluded.tokens,
            usd = excluded.usd, actions = excluded.actions, at = clock_timestamp()
        WHERE budget_charges.kind = 'reservation';
        IF v_charge ->> 'kind' <> 'reservation' THEN
            PERFORM charge_ancestors(p_task_id, v_key, v_charge);
        END IF;
    END IF;
    v_terminal := v_locked.state IN ('completed', 'failed', 'canceled', 'rejected')
                  AND NOT v_closing;
    IF NOT v_terminal THEN
        IF v_pause IS NOT NULL THEN
            -- The run asks a person: the request is a row, shown in the status message.
            INSERT INTO pauses (task_id, id, kind, segment, item_id, attempt, summary, details,
                                options, on_expiry, expires_at)
            SELECT p_task_id, v_pause ->> 'id', v_pause ->> 'kind', t.segment,
                   v_pause ->> 'item_id', (v_pause ->> 'attempt')::integer,
                   v_pause ->> 'summary', coalesce(v_pause -> 'details', '{}'::jsonb),
                   v_pause -> 'options', v_pause ->> 'on_expiry',
                   clock_timestamp() + make_interval(secs => (v_pause ->> 'expires_s')::float8)
            FROM tasks t WHERE t.id = p_task_id
            ON CONFLICT (task_id, id) DO NOTHING;
            SELECT jsonb_build_object('approval_request', jsonb_build_object(
                       'id', id, 'kind', kind, 'summary', summary, 'details', details,
                       'options', options, 'expires_at', expires_at, 'on_expiry', on_expiry))
            INTO v_status_data
            FROM pauses WHERE task_id = p_task_id AND id = v_pause ->> 'id';
        END IF;
        IF v_delegation IS NOT NULL THEN
            -- The work handed to a child run or a peer: the parent waits on this row.
            INSERT INTO delegations (task_id, id, item_id, attempt, peer, child_id, remote_id,
                                     goal, remote_state)
            VALUES (p_task_id, v_delegation ->> 'id', v_delegation ->> 'item_id',
                    (v_delegation ->> 'attempt')::integer, v_delegation ->> 'peer',
                    v_delegation ->> 'child_id', v_delegation ->> 'remote_id',
                    v_delegation ->> 'goal', v_delegation ->> 'remote_state')
            ON CONFLICT (task_id, id) DO NOTHING;
            v_patch := coalesce(v_patch, '{}'::jsonb)
                       || jsonb_build_object('delegations', delegations_json(p_task_id));

        END IF;
        IF jsonb_array_length(v_facts) > 0 THEN
            -- Facts the step established or checked again: the rows, and metadata.facts.
            INSERT INTO facts (task_id, key, value, source, check_command, max_age_s)
            SELECT p_task_id, f ->> 'key', f ->> 'value', f ->> 'source', f ->> 'check',
                   (f ->> 'max_age_s')::integer
            FROM jsonb_array_elements(v_facts) AS f
            ON CONFLICT (task_id, key) DO UPDATE
            SET value = excluded.value, source = excluded.source,
                check_command = excluded.check_command, max_age_s = excluded.max_age_s,
                checked_at = clock_timestamp();
            v_patch := coalesce(v_patch, '{}'::jsonb) || jsonb_build_object('facts', (
                SELECT jsonb_object_agg(key, jsonb_build_object(
                           'value', value, 'source', source, 'check', check_command,
                           'max_age_s', max_age_s, 'checked_at', checked_at))
                FROM facts WHERE task_id = p_task_id));
        END IF;
        PERFORM insert_items(p_task_id, v_new_items);
        IF jsonb_array_length(v_new_items) > 0 THEN
            v_plan_items := NULL;  -- the plan grows: it is assembled anew
        END IF;
        -- The step's item, and any more it changes at once (a re-verification round): each
        -- row as persistence/views.py worked it out from the row the step read, with its view.
        FOR v_item IN
            SELECT value FROM jsonb_array_elements(
                CASE WHEN v_item IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(v_item) END
                || coalesce(nullif(p_step -> 'more_items', 'null'::jsonb), '[]'::jsonb))
        LOOP
            UPDATE items
            SET status = v_item ->> 'status', attempts = (v_item ->> 'attempts')::integer,
                title = v_item ->> 'title', run = v_item ->> 'run',
                verify_command = v_item ->> 'verify_command',
                verify_timeout_s = (v_item ->> 'verify_timeout_s')::integer,
                run_timeout_s = (v_item ->> 'run_timeout_s')::integer,
                max_attempts = (v_item ->> 'max_attempts')::integer,
                evidence = nullif(v_item -> 'evidence', 'null'::jsonb),
                commit_sha = v_item ->> 'commit_sha',
                failures = (v_item ->> 'failures')::integer,
                history = v_item -> 'history', view = v_item -> 'view',
                -- The item's clock starts with its first attempt.
                started_at = CASE WHEN v_item ->> 'status' = 'in_progress'
                                  THEN coalesce(started_at, clock_timestamp())
                                  ELSE started_at END,
                updated_at = clock_timestamp()
            WHERE task_id = p_task_id AND item_id = v_item ->> 'item_id'
            RETURNING position INTO v_position;
            v_changed := v_changed + 1;
            -- Where the plan artifact shows it (items in order of position), and as it does.
            v_plan_items := v_plan_items || jsonb_build_array(jsonb_build_object(
                'id', v_item ->> 'item_id',
                'index', (SELECT count(*) FROM items
                          WHERE task_id = p_task_id AND position < v_position),
                'item', (v_item -> 'view') || jsonb_build_object('history', v_item -> 'history')));
        END LOOP;
        -- The run's results, kept whole for the URLs they are served from.
        INSERT INTO task_files (task_id, kind, name, media_type, filename, size, sha256, body)
        SELECT p_task_id, 'output', o ->> 'name', o ->> 'media_type', o ->> 'filename',
               (o ->> 'size')::bigint, o ->> 'sha256', decode(o ->> 'body', 'base64')
        FROM jsonb_array_elements(coalesce(nullif(p_step -> 'outputs', 'null'::jsonb),
                                           '[]'::jsonb)) AS o
        ON CONFLICT (task_id, kind, name) DO UPDATE
        SET media_type = excluded.media_type, filename = excluded.filename,
            size = excluded.size, sha256 = excluded.sha256, body = excluded.body,
            created_at = clock_timestamp();
        IF p_bundle IS NOT NULL THEN
            INSERT INTO checkpoints (task_id, seq, sha, bundle)
            SELECT p_task_id, coalesce(max(seq), 0) + 1, p_step ->> 'checkpoint_sha', p_bundle
            FROM checkpoints WHERE task_id = p_task_id;
        END IF;
        IF v_call IS NOT NULL THEN
            INSERT INTO model_calls (key, task_id, item_id, attempt, purpose, model, stop_reason,
                                     input_tokens, output_tokens, cache_read_tokens,
                                     cache_write_tokens)
            VALUES (v_key, p_task_id, p_step ->> 'effect_item_id',
                    (p_step ->> 'effect_attempt')::integer, v_call ->> 'purpose',
                    v_call ->> 'model', v_call ->> 'stop_reason',
                    (v_call ->> 'input_tokens')::integer, (v_call ->> 'output_tokens')::integer,
                    (v_call ->> 'cache_read_tokens')::integer,
                    (v_call ->> 'cache_write_tokens')::integer)
            ON CONFLICT (key) DO NOTHING;
        END IF;
        PERFORM apply_task_change(
            p_task_id,
            jsonb_build_object(
                -- A task-level transition without a from-state starts from the locked state.
                'transitions', (
                    SELECT coalesce(jsonb_agg(
                        CASE WHEN n.x ->> 'item_id' IS NULL AND n.x ->> 'from_state' IS NULL
                             THEN n.x || jsonb_build_object('from_state', v_locked.state)
                             ELSE n.x END ORDER BY n.ord), '[]'::jsonb)
                    FROM jsonb_array_elements(coalesce(p_step -> 'transitions', '[]'::jsonb))
                         WITH ORDINALITY AS n (x, ord)),
                'state', p_step -> 'task_state',
                'status_text', coalesce(nullif(p_step -> 'status_text', 'null'::jsonb),
                                        to_jsonb(v_locked.status_text)),
                'items_changed', v_changed > 0 OR jsonb_array_length(v_new_items) > 0,
                'plan_items', v_plan_items,
                'summary', p_step -> 'summary',
                'charged', v_charge IS NOT NULL,
                'report', p_step -> 'report',
                'fingerprint', p_step -> 'fingerprint',
                'checkpoint_sha', CASE WHEN p_bundle IS NOT NULL
                                       THEN p_step -> 'checkpoint_sha' END,
                'metadata_patch', v_patch,
                'policy_patch', p_step -> 'policy_patch',
                'base_sha', p_step -> 'base_sha',
                'seed_patch', p_step -> 'seed_patch',
                'status_data', v_status_data),
            v_locked.transition_seq,
            v_locked.event_seq);
    ELSE
        PERFORM pg_notify('a2a_task_events', p_task_id);
    END IF;
    -- started_at: when this step's run began (its view was read), not when an earlier step
    -- marked it: a pre-mark before a wait for a person would count the wait as its time.
    INSERT INTO effects (key, task_id, item_id, attempt, step, status, runs, result,
                         started_at, completed_at)
    VALUES (v_key, p_task_id, p_step ->> 'effect_item_id', (p_step ->> 'effect_attempt')::integer,
            p_step ->> 'step', 'completed', (p_step ->> 'runs')::integer, p_step -> 'result',
            coalesce((p_step ->> 'started_at')::timestamptz, clock_timestamp()),
            clock_timestamp())
    ON CONFLICT (key) DO UPDATE
    SET status = 'completed', result = excluded.result, completed_at = excluded.completed_at,
        started_at = CASE WHEN p_step ->> 'started_at' IS NOT NULL THEN excluded.started_at
                          ELSE effects.started_at END,
        runs = greatest(effects.runs, excluded.runs);
    IF v_then IS NOT NULL AND NOT v_terminal THEN
        INSERT INTO effects (key, task_id, item_id, attempt, step, status, runs)
        VALUES (v_then ->> 'key', p_task_id, v_then ->> 'item_id',
                (v_then ->> 'attempt')::integer, v_then ->> 'step', 'started', 0)
        ON CONFLICT (key) DO NOTHING;
    END IF;
    IF v_delegation ->> 'child_id' IS NOT NULL AND NOT v_terminal THEN
        -- A child that moved on before this record (a crash in between): catch up.
        PERFORM mirror_to_parent(v_delegation ->> 'child_id');
    END IF;
    RETURN jsonb_build_object(
        'replayed', false,
        'state', CASE WHEN v_terminal THEN v_locked.state
                      ELSE coalesce(p_step ->> 'task_state', v_locked.state) END,
        'result', p_step -> 'result',
        -- The count its write of the items made (none written: null).
        'items_rev', CASE WHEN NOT v_terminal
                               AND (v_changed > 0 OR jsonb_array_length(v_new_items) > 0)
                          THEN (SELECT items_rev FROM tasks WHERE id = p_task_id) END,
        'transitions', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'seq', tr.seq, 'item_id', tr.item_id, 'attempt', tr.attempt,
                       'from_state', tr.from_state, 'to_state', tr.to_state,
                       'reason', tr.reason, 'at', tr.at) ORDER BY tr.seq), '[]'::jsonb)
            FROM transitions tr
            WHERE tr.task_id = p_task_id AND tr.seq > v_locked.transition_seq));
END
$$;

-- The step-duration histogram's upper bounds in seconds, for /metrics and the folding below.
CREATE OR REPLACE FUNCTION metric_step_bounds() RETURNS float8[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600, 3600]::float8[]
$$;

-- The histogram bucket of a duration: the first bound it does not exceed (1-based), or one
-- past the last (+Inf only). width_bucket on the negated bounds counts those >= p_seconds.
CREATE OR REPLACE FUNCTION metric_step_bucket(p_seconds float8) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT cardinality(metric_step_bounds()) + 1 - width_bucket(
        -p_seconds, ARRAY(SELECT -b FROM unnest(metric_step_bounds()) b ORDER BY b DESC))
$$;

-- Counters outlive the rows they count: what a delete removes (retention's compaction and
-- deletion, a cascade from tasks) is added to metric_totals in the same transaction, and
-- /metrics reports live rows plus totals. Rows are folded in key order, so two deletes at
-- once lock metric_totals' rows in one order.
CREATE OR REPLACE FUNCTION fold_metrics(p_rows jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO metric_totals AS m (name, label, value)
    SELECT r ->> 'name', r ->> 'label', sum((r ->> 'value')::float8)
    FROM jsonb_array_elements(p_rows) r
    GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (name, label) DO UPDATE SET value = m.value + excluded.value;
END
$$;

CREATE OR REPLACE FUNCTION fold_effects() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fold_metrics(coalesce(jsonb_agg(f), '[]'))
    FROM (SELECT g.step AS label, d.s, g.runs FROM gone g
          CROSS JOIN LATERAL (SELECT extract(epoch FROM g.completed_at - g.started_at)::float8
                              AS s) d
          WHERE g.status = 'completed') c
    CROSS JOIN LATERAL (VALUES
        (jsonb_build_object('name', 'steps', 'label', c.label, 'value', 1)),
        (jsonb_build_object('name', 'step_reruns', 'label', c.label, 'value', c.runs - 1)),
        (jsonb_build_object('name', 'step_seconds', 'label', c.label, 'value', c.s)),
        (jsonb_build_object('name', 'step_bucket',
                            'label', c.label || ' ' || metric_step_bucket(c.s), 'value', 1))
    ) AS v(f);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION fold_model_calls() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fold_metrics(jsonb_build_array(
        jsonb_build_object('name', 'model_calls', 'label', '', 'value', count(*)),
        jsonb_build_object('name', 'tokens', 'label', 'input',
                           'value', coalesce(sum(input_tokens), 0)),
        jsonb_build_object('name', 'tokens', 'label', 'output',
                           'value', coalesce(sum(output_tokens), 0)),
        jsonb_build_object('name', 'tokens', 'label', 'cache_read',
                           'value', coalesce(sum(cache_read_tokens), 0)),
        jsonb_build_object('name', 'tokens', 'label', 'cache_write',
                           'value', coalesce(sum(cache_write_tokens), 0))))
    FROM gone;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION fold_budget_charges() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A child run's spending is on its parent's ledger too (kind `child`): counted once.
    PERFORM fold_metrics(jsonb_build_array(jsonb_build_object(
        'name', 'usd', 'label', '', 'value', coalesce(sum(usd), 0))))
    FROM gone WHERE kind NOT IN ('reservation', 'child');
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION fold_tasks() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fold_metrics(jsonb_build_array(jsonb_build_object(
        'name', 'budget_stops', 'label', '', 'value', count(*))))
    FROM gone WHERE metadata -> 'failure' ->> 'reason' = 'budget_exhausted';
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION fold_push_configs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fold_metrics(jsonb_build_array(
        jsonb_build_object('name', 'push', 'label', 'delivered',
                           'value', coalesce(sum(delivered), 0)),
        jsonb_build_object('name', 'push', 'label', 'failed', 'value', coalesce(sum(failures), 0)),
        jsonb_build_object('name', 'push', 'label', 'dead_lettered',
                           'value', coalesce(sum(dead_lettered), 0))))
    FROM gone;
    RETURN NULL;
END
$$;

-- The triggers, made once (a migration cannot: the functions come after it); a DROP and
-- CREATE on every start would lock the tables each time.
DO $$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['effects', 'model_calls', 'budget_charges', 'tasks',
                                   'push_configs'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_trigger
                       WHERE tgname = v_table || '_fold_metrics' AND NOT tgisinternal) THEN
            EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS gone '
                           'FOR EACH STATEMENT EXECUTE FUNCTION %I()',
                           v_table || '_fold_metrics', v_table, 'fold_' || v_table);
        END IF;
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'budget_charges_keep_totals' AND NOT tgisinternal) THEN
        -- The totals start from the ledger as it is, with no charge written in between.
        LOCK TABLE budget_charges IN SHARE ROW EXCLUSIVE MODE;
        CREATE TRIGGER budget_charges_keep_totals
        AFTER INSERT OR UPDATE OR DELETE ON budget_charges
        FOR EACH ROW EXECUTE FUNCTION keep_budget_totals();
        DELETE FROM budget_totals;
        INSERT INTO budget_totals (task_id, tokens, usd, tokens_reserved, usd_reserved, actions,
                                   by_tool)
        SELECT c.task_id,
               coalesce(sum(c.tokens) FILTER (WHERE c.kind <> 'reservation'), 0),
               coalesce(sum(c.usd) FILTER (WHERE c.kind <> 'reservation'), 0),
               coalesce(sum(c.tokens) FILTER (WHERE c.kind = 'reservation'), 0),
               coalesce(sum(c.usd) FILTER (WHERE c.kind = 'reservation'), 0),
               coalesce(sum(c.actions), 0),
               (SELECT coalesce(jsonb_object_agg(x.tool, x.n), '{}'::jsonb)
                FROM (SELECT tool, sum(actions) AS n FROM budget_charges
                      WHERE task_id = c.task_id AND tool IS NOT NULL GROUP BY tool) AS x)
        FROM budget_charges c
        GROUP BY c.task_id;
    END IF;
END
$$;

-- A task row as the JSON the store turns into TaskRow.
CREATE OR REPLACE FUNCTION task_json(p_task_id text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT jsonb_build_object(
                   'task_id', id, 'owner', owner, 'context_id', context_id, 'state', state,
                   'status_text', status_text, 'status_at', status_at, 'history', history,
                   'metadata', metadata, 'plan', plan, 'report', report, 'event_seq', event_seq,
                   'status_data', status_data, 'segment', segment)
        FROM tasks WHERE id = p_task_id
    );
END
$$;

-- A submission in one statement: the task row, its items, transition 1 (and a rejection when
-- there is one), the derived summary and budget, events and NOTIFY; returns
-- {task, repeated, digest_matches}. A messageId this owner already sent is not applied again:
-- the task it made comes back (`repeated`), also when two sends race (the second waits on
-- the first's claim of the message, then finds it).
-- p_task: {task_id, owner, context_id, goal, first_message, message_id, digest, metadata,
-- budget, items, summary, rejection, policy, continue_from, seed, seed_from, inputs}; items
-- whole rows with their views and `summary` the plan's (persistence/views.py).
-- A workspace seeded from an earlier task (`seed_from`) or a continuation starts from that
-- task's last checkpoint (its bundles copied), which is also the start its results are
-- measured against; what rebuilds a cloned repository's base travels along (`origin`).
CREATE OR REPLACE FUNCTION create_task(p_task jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_id text := p_task ->> 'task_id';
    v_rejection text := p_task ->> 'rejection';
    v_items jsonb := coalesce(p_task -> 'items', '[]'::jsonb);
    v_transitions jsonb := jsonb_build_array(
        jsonb_build_object('to_state', 'submitted', 'reason', 'task received'));
    v_accepted text := 'Accepted; waiting for a worker.';
    v_existing record;
    v_from text := p_task ->> 'continue_from';
    v_earlier record;
    v_sha text;
    v_done integer;
    v_goal text := p_task ->> 'goal';
    v_policy jsonb := coalesce(p_task -> 'policy', '{}'::jsonb);
    v_metadata jsonb := coalesce(p_task -> 'metadata', '{}'::jsonb);
    v_seed jsonb := nullif(p_task -> 'seed', 'null'::jsonb);
    v_seed_from text := p_task ->> 'seed_from';
    v_view_of text := p_task ->> 'view_of';
    v_source record;
    v_copy_from text;
    v_has_items boolean;
BEGIN
    IF NOT p_task ? 'summary' THEN
        PERFORM refuse_older_code('create_task');
    END IF;
    INSERT INTO messages (owner, message_id, task_id, digest)
    VALUES (p_task ->> 'owner', p_task ->> 'message_id', v_id, p_task ->> 'digest')
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        SELECT task_id, digest INTO v_existing FROM messages
        WHERE owner = p_task ->> 'owner' AND message_id = p_task ->> 'message_id';
        RETURN jsonb_build_object('task', task_json(v_existing.task_id), 'repeated', true,
                                  'digest_matches',
                                  v_existing.digest IN ('', p_task ->> 'digest'));
    END IF;
    IF v_seed_from IS NOT NULL THEN
        -- A workspace that starts as an earlier task of this owner ended.
        SELECT id, state, checkpoint_sha, seed INTO v_source
        FROM tasks WHERE id = v_seed_from AND owner = p_task ->> 'owner' FOR UPDATE;
        IF NOT FOUND OR v_source.state NOT IN ('completed', 'failed', 'canceled')
           OR v_source.checkpoint_sha IS NULL THEN
            DELETE FROM messages
            WHERE owner = p_task ->> 'owner' AND message_id = p_task ->> 'message_id';
            RETURN jsonb_build_object(
                'error', CASE WHEN v_source.id IS NULL THEN 'not_found'
                              WHEN v_source.state IN ('completed', 'failed', 'canceled')
                              THEN 'no_workspace' ELSE 'not_ended' END,
                'state', v_source.state, 'task_id', v_seed_from);
        END IF;
        v_sha := v_source.checkpoint_sha;
        v_copy_from := v_seed_from;
        v_seed := jsonb_build_object(
            'kind', 'from_task', 'task_id', v_seed_from, 'commit', v_sha,
            'origin', CASE WHEN v_source.seed ->> 'kind' = 'git' THEN v_source.seed
                           ELSE v_source.seed -> 'origin' END);
        v_metadata := v_metadata || jsonb_build_object(
            'workspace', jsonb_build_object('source', 'from_task', 'task_id', v_seed_from,
                                            'start_commit', v_sha));
    END IF;
    IF v_view_of IS NOT NULL THEN
        -- A child run that works on a copy of its parent's workspace as it is now.
        SELECT id, state, checkpoint_sha, seed INTO v_source FROM tasks WHERE id = v_view_of;
        IF v_source.checkpoint_sha IS NOT NULL THEN
            v_sha := v_source.checkpoint_sha;
            v_copy_from := v_view_of;
            v_seed := jsonb_build_object(
                'kind', 'from_task', 'task_id', v_view_of, 'commit', v_sha,
                'origin', CASE WHEN v_source.seed ->> 'kind' = 'git' THEN v_source.seed
                               ELSE v_source.seed -> 'origin' END);
            v_metadata := v_metadata || jsonb_build_object(
                'workspace', jsonb_build_object('source', 'from_task', 'task_id', v_view_of,
                                                'start_commit', v_sha));
        END IF;
    END IF;
    IF v_from IS NOT NULL THEN
        -- A continuation: the earlier task's plan and last verified checkpoint (see below).
        SELECT id, state, goal, policy, metadata INTO v_earlier
        FROM tasks WHERE id = v_from AND owner = p_task ->> 'owner' FOR UPDATE;
        IF NOT FOUND OR v_earlier.state NOT IN ('completed', 'failed', 'canceled')
           OR NOT EXISTS (SELECT 1 FROM items WHERE task_id = v_from) THEN
            DELETE FROM messages
            WHERE owner = p_task ->> 'owner' AND message_id = p_task ->> 'message_id';
            RETURN jsonb_build_object(
                'error', CASE WHEN v_earlier.id IS NULL THEN 'not_found'
                              WHEN v_earlier.state IN ('completed', 'failed', 'canceled')
                              THEN 'no_plan' ELSE 'not_ended' END,
                'state', v_earlier.state);
        END IF;
        v_goal := v_earlier.goal;
        IF v_policy = '{}'::jsonb THEN
            v_policy := v_earlier.policy;
        END IF;
        SELECT count(*) FILTER (WHERE status = 'done'),
               (array_agg(commit_sha ORDER BY position DESC)
                    FILTER (WHERE status = 'done' AND commit_sha IS NOT NULL))[1]
        INTO v_done, v_sha
        FROM items WHERE task_id = v_from;
        IF v_sha IS NULL THEN  -- nothing verified: the earlier task's start
            SELECT sha INTO v_sha FROM checkpoints WHERE task_id = v_from ORDER BY seq LIMIT 1;
        END IF;
        v_metadata := v_metadata || jsonb_build_object(
            'continues', jsonb_build_object('task_id', v_from, 'checkpoint', v_sha,
                                            'items_done', v_done));
        v_copy_from := v_from;
        SELECT seed INTO v_source FROM tasks WHERE id = v_from;
        v_seed := jsonb_build_object(
            'kind', 'from_task', 'task_id', v_from, 'commit', v_sha,
            'origin', CASE WHEN v_source.seed ->> 'kind' = 'git' THEN v_source.seed
                           ELSE v_source.seed -> 'origin' END);
        UPDATE tasks
        SET metadata = metadata || jsonb_build_object(
                'continued_by', coalesce(metadata -> 'continued_by', '[]'::jsonb)
                                || to_jsonb(v_id)),
            updated_at = clock_timestamp()
        WHERE id = v_from;
        PERFORM pg_notify('a2a_task_events', v_from);
        v_transitions := jsonb_build_array(jsonb_build_object(
            'to_state', 'submitted',
            'reason', format('task received: continues task %s from checkpoint %s (%s item(s) '
                             'done stay done)', v_from, left(coalesce(v_sha, 'none'), 12),
                             v_done)));
    END IF;
    IF v_rejection IS NOT NULL THEN
        v_transitions := v_transitions || jsonb_build_array(jsonb_build_object(
            'from_state', 'submitted', 'to_state', 'rejected', 'reason', v_rejection));
    END IF;
    -- The row as the submission leaves it, written once (an insert and then an update of
    -- every column and index through apply_task_change() was a third of PostgreSQL's part of
    -- a send): its state, its transitions and events counted, the plan artifact from the
    -- items as given (persistence/views.py made their views), and metadata.budget of a task
    -- that has spent nothing yet.
    v_has_items := jsonb_array_length(v_items) > 0;
    INSERT INTO tasks (id, owner, context_id, state, status_text, goal, history, metadata, budget,
                       policy, checkpoint_sha, seed, base_sha, trace_context, parent_id, plan,
                       transition_seq, event_seq, items_rev, plan_seq, plan_full_seq)
    VALUES (v_id, p_task ->> 'owner', p_task ->> 'context_id',
            CASE WHEN v_rejection IS NULL THEN 'submitted' ELSE 'rejected' END,
            coalesce(v_rejection, v_accepted), v_goal,
            jsonb_build_array(p_task -> 'first_message'),
            v_metadata || coalesce(nullif(p_task -> 'summary', 'null'::jsonb), '{}'::jsonb)
            || jsonb_build_object('budget', budget_json(
                   p_task -> 'budget', 0, 0, NULL, NULL, 0, '[]'::jsonb)),
            p_task -> 'budget', v_policy, v_sha, v_seed, v_sha,
            p_task ->> 'trace_context', p_task ->> 'parent_id',
            CASE WHEN v_has_items THEN plan_artifact(
                v_goal,
                (SELECT jsonb_agg(x -> 'view' || jsonb_build_object('history', x -> 'history')
                                  ORDER BY (x ->> 'position')::integer)
                 FROM jsonb_array_elements(v_items) AS x),
                '[]'::jsonb) END,
            jsonb_array_length(v_transitions),
            CASE WHEN v_has_items THEN 2 ELSE 1 END,
            CASE WHEN v_has_items THEN 1 ELSE 0 END,
            -- The plan event (number 1) holds the plan whole.
            CASE WHEN v_has_items THEN 1 END, CASE WHEN v_has_items THEN 1 END);
    -- The message's files, kept whole (the message in the history keeps a link to each).
    INSERT INTO task_files (task_id, kind, name, media_type, filename, size, sha256, body, url)
    SELECT v_id, 'input', f ->> 'name', f ->> 'media_type', f ->> 'filename',
           (f ->> 'size')::bigint, f ->> 'sha256', decode(f ->> 'body', 'base64'), f ->> 'url'
    FROM jsonb_array_elements(coalesce(p_task -> 'inputs', '[]'::jsonb)) AS f;
    IF v_copy_from IS NOT NULL THEN
        -- Its own copy of the checkpoints, so its workspace can be rebuilt like any other.
        INSERT INTO checkpoints (task_id, seq, sha, bundle)
        SELECT v_id, seq, sha, bundle FROM checkpoints WHERE task_id = v_copy_from;
    END IF;
    -- The items as the store made them (persistence/views.py): a continuation's are the
    -- earlier task's, done ones kept and the rest started afresh.
    PERFORM insert_items(v_id, v_items);
    PERFORM insert_transitions(v_id, 0, jsonb_build_object('transitions', v_transitions));
    PERFORM insert_task_events(
        v_id, CASE WHEN v_has_items THEN 1 END, NULL, CASE WHEN v_has_items THEN 2 ELSE 1 END);
    PERFORM pg_notify('a2a_task_events', v_id);
    IF p_task ->> 'parent_id' IS NOT NULL THEN
        PERFORM mirror_to_parent(v_id);  -- a child run shows on its parent (apply_task_change)
    END IF;
    IF v_rejection IS NULL THEN
        -- The door does not enqueue the run: a worker's starter does, woken by this.
        PERFORM pg_notify('a2a_runs_submitted', v_id);
    END IF;
    RETURN jsonb_build_object('task', task_json(v_id), 'repeated', false,
                              'digest_matches', true);
END
$$;

-- A reply to a task's pending request, in one transaction: the message kept once (a repeat of
-- its messageId changes nothing), the decision on the request's row, the task back to
-- working with the decision as a transition, and the next workflow segment numbered (by
-- apply_task_change). Nothing is written unless the reply is applied.
-- p_reply: {owner, message, message_id, digest, approval_id, decision, note, decided_by, how}.
-- Returns {result: resumed | repeat | none_pending | unknown | decided | bad_decision | missing,
-- task, pause, segment}.
CREATE OR REPLACE FUNCTION answer_pause(p_task_id text, p_reply jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_locked record;
    v_pause pauses%ROWTYPE;
    v_asked text := p_reply ->> 'approval_id';
    v_decision text := p_reply ->> 'decision';
    v_message_id text := p_reply ->> 'message_id';
    v_by text := coalesce(nullif(p_reply ->> 'decided_by', ''), 'the caller');
    v_note text := nullif(p_reply ->> 'note', '');
    v_how text := coalesce(p_reply ->> 'how', 'reply');
    v_child text;
    v_forwarded jsonb;
BEGIN
    SELECT state, transition_seq, event_seq, segment INTO v_locked
    FROM tasks WHERE id = p_task_id AND owner = p_reply ->> 'owner' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('result', 'missing');
    END IF;
    IF v_message_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM messages WHERE owner = p_reply ->> 'owner' AND message_id = v_message_id
    ) THEN
        RETURN jsonb_build_object('result', 'repeat', 'task', task_json(p_task_id));
    END IF;
    -- The caller's condition (ifGenerationMatch): applied only to the task as it last saw it.
    IF p_reply ? 'if_generation' AND v_locked.event_seq <> (p_reply ->> 'if_generation')::bigint
    THEN
        RETURN jsonb_build_object('result', 'stale', 'generation', v_locked.event_seq);
    END IF;
    SELECT * INTO v_pause FROM pauses WHERE task_id = p_task_id AND decision IS NULL;
    IF NOT FOUND OR (v_asked IS NOT NULL AND v_asked <> v_pause.id) THEN
        SELECT * INTO v_pause FROM pauses WHERE task_id = p_task_id AND id = v_asked;
        IF FOUND THEN
            RETURN jsonb_build_object('result', 'decided', 'pause', to_jsonb(v_pause));
        END IF;
        RETURN jsonb_build_object(
            'result', CASE WHEN v_locked.state = 'input_required' THEN 'unknown'
                           ELSE 'none_pending' END,
            'pending', (SELECT id FROM pauses WHERE task_id = p_task_id AND decision IS NULL));
    END IF;
    IF NOT v_pause.options ? v_decision THEN
        RETURN jsonb_build_object('result', 'bad_decision', 'pause', to_jsonb(v_pause));
    END IF;
    IF v_message_id IS NOT NULL THEN
        INSERT INTO messages (owner, message_id, task_id, digest)
        VALUES (p_reply ->> 'owner', v_message_id, p_task_id, p_reply ->> 'digest');
        UPDATE tasks SET history = history || jsonb_build_array(p_reply -> 'message')
        WHERE id = p_task_id;
    END IF;
    UPDATE pauses
    SET decision = v_decision, note = v_note, decided_by = v_by, decided_how = v_how,
        decided_at = clock_timestamp(), message_id = v_message_id
    WHERE task_id = p_task_id AND id = v_pause.id;
    IF nullif(p_reply -> 'budget', 'null'::jsonb) IS NOT NULL AND v_decision = 'approve' THEN
        -- An approval that raises the limits (checked against the server's caps at the edge).
        UPDATE tasks SET budget = budget || (p_reply -> 'budget') WHERE id = p_task_id;
    END IF;
    PERFORM apply_task_change(
        p_task_id,
        jsonb_build_object(
            'transitions', jsonb_build_array(jsonb_build_object(
                'from_state', 'input_required', 'to_state', 'working',
                'reason', format('%s `%s`: %s by %s%s', replace(v_pause.kind, '_', ' '),
                                 v_pause.id, v_decision,
                                 CASE WHEN v_how = 'expired'
                                      THEN 'default (the request expired)' ELSE v_by END,
                                 coalesce(': ' || v_note, '')))),
            'state', 'working',
            'charged', nullif(p_reply -> 'budget', 'null'::jsonb) IS NOT NULL,
            'status_text', format('Resuming after %s `%s` was answered: %s',
                                  replace(v_pause.kind, '_', ' '), v_pause.id, v_decision)),
        v_locked.transition_seq,
        v_locked.event_seq);
    IF v_pause.kind = 'delegated_request' THEN
        -- A delegate's question, answered on the parent: a child run of this service gets
        -- the answer in this transaction; a peer's is sent on by the parent's next segment.
        SELECT child_id INTO v_child FROM delegations
        WHERE task_id = p_task_id AND id = v_pause.details ->> 'delegation';
        IF v_child IS NOT NULL THEN
            v_forwarded := answer_pause(v_child, p_reply || jsonb_build_object(
                'approval_id', v_pause.details -> 'request' ->> 'id',
                'message_id', v_message_id || '>' || v_child,
                'decided_by', v_by));
        END IF;
    END IF;
    RETURN jsonb_build_object('result', 'resumed', 'task', task_json(p_task_id),
                              'segment', v_locked.segment + 1,
                              'forwarded', CASE WHEN v_forwarded ->> 'result' = 'resumed'
                                                THEN jsonb_build_object(
                                                    'task_id', v_child,
                                                    'segment', v_forwarded -> 'segment') END,
                              'pause', (SELECT to_jsonb(p) FROM pauses p
                                        WHERE p.task_id = p_task_id AND p.id = v_pause.id));
END
$$;

-- A steering note from the caller for a working task: kept for the model's next context,
-- shown as a progress entry, and its message kept once.
-- p_note: {owner, message, message_id, digest, text}. Returns {result: noted | repeat |
-- missing | not_working, task, seq}.
CREATE OR REPLACE FUNCTION add_note(p_task_id text, p_note jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_locked record;
    v_seq integer;
BEGIN
    SELECT state, transition_seq, event_seq INTO v_locked
    FROM tasks WHERE id = p_task_id AND owner = p_note ->> 'owner' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('result', 'missing');
    END IF;
    IF EXISTS (SELECT 1 FROM messages
               WHERE owner = p_note ->> 'owner' AND message_id = p_note ->> 'message_id') THEN
        RETURN jsonb_build_object('result', 'repeat', 'task', task_json(p_task_id));
    END IF;
    IF p_note ? 'if_generation' AND v_locked.event_seq <> (p_note ->> 'if_generation')::bigint
    THEN
        RETURN jsonb_build_object('result', 'stale', 'generation', v_locked.event_seq);
    END IF;
    IF v_locked.state NOT IN ('submitted', 'working') THEN
        RETURN jsonb_build_object('result', 'not_working', 'task', task_json(p_task_id));
    END IF;
    INSERT INTO messages (owner, message_id, task_id, digest)
    VALUES (p_note ->> 'owner', p_note ->> 'message_id', p_task_id, p_note ->> 'digest');
    SELECT coalesce(max(seq), 0) + 1 INTO v_seq FROM notes WHERE task_id = p_task_id;
    INSERT INTO notes (task_id, seq, text, message_id)
    VALUES (p_task_id, v_seq, p_note ->> 'text', p_note ->> 'message_id');
    UPDATE tasks SET history = history || jsonb_build_array(p_note -> 'message')
    WHERE id = p_task_id;
    PERFORM apply_task_change(
        p_task_id,
        jsonb_build_object('transitions', jsonb_build_array(jsonb_build_object(
            'from_state', v_locked.state, 'to_state', v_locked.state,
            'reason', 'note from the caller: ' || left(p_note ->> 'text', 500)))),
        v_locked.transition_seq,
        v_locked.event_seq);
    RETURN jsonb_build_object('result', 'noted', 'task', task_json(p_task_id), 'seq', v_seq);
END
$$;

-- A step's charge, also on the ledgers of every task above it (a child run's spending is its
-- parent's too): kind `child`, which counts toward the parent's money, tokens and actions
-- but not toward its steps without progress.
CREATE OR REPLACE FUNCTION charge_ancestors(p_task_id text, p_key text, p_charge jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_up text;
BEGIN
    SELECT parent_id INTO v_up FROM tasks WHERE id = p_task_id;
    WHILE v_up IS NOT NULL LOOP
        -- The ancestor's row first, then its totals (by the charge's trigger): the order in
        -- which the ancestor's own steps take them, so the two never wait on each other.
        PERFORM 1 FROM tasks WHERE id = v_up FOR UPDATE;
        INSERT INTO budget_charges (key, task_id, kind, tool, tokens, usd, actions, at)
        VALUES (p_key || '@' || v_up, v_up, 'child', p_charge ->> 'tool',
                (p_charge ->> 'tokens')::bigint, (p_charge ->> 'usd')::numeric,
                (p_charge ->> 'actions')::integer, clock_timestamp())
        ON CONFLICT (key) DO NOTHING;
        UPDATE tasks SET metadata = metadata || jsonb_build_object('budget', budget_status(id, ''))
        WHERE id = v_up;
        -- Every write to a task row tells the read caches (GetTask showed a parent's budget
        -- as it was before its child's charges until something else changed the parent).
        PERFORM pg_notify('a2a_task_events', v_up);
        SELECT parent_id INTO v_up FROM tasks WHERE id = v_up;
    END LOOP;
END
$$;

-- A task's delegations as its metadata shows them.
CREATE OR REPLACE FUNCTION delegations_json(p_task_id text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', id, 'item', item_id, 'peer', peer, 'child', child_id,
                       'remote_task', remote_id, 'state', state, 'remote_state', remote_state,
                       'goal', left(goal, 200)) ORDER BY created_at), '[]'::jsonb)
            FROM delegations WHERE task_id = p_task_id);
END
$$;

-- What a delegate (a child run, or a peer's task) did, on its parent: `p_state` its state
-- now, `p_request` the approval request it waits on (null: none), `p_result` what it ended
-- with (null: it has not ended). A request surfaces on the parent as a `delegated_request`
-- (the parent waits for a person); one answered elsewhere closes there; an end marks the
-- delegation ended and numbers the parent's next segment, which whoever called this starts.
-- Returns {segment} when the parent is to go on, else {}.
CREATE OR REPLACE FUNCTION delegation_changed(
    p_task_id text, p_id text, p_state text, p_request jsonb, p_result jsonb
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_parent record;
    v_d delegations%ROWTYPE;
    v_via text;
    v_who text;
    v_refused integer;
    v_why text;
    v_asks text;
BEGIN
    SELECT state, transition_seq, event_seq, segment INTO v_parent
    FROM tasks WHERE id = p_task_id FOR UPDATE;
    SELECT * INTO v_d FROM delegations WHERE task_id = p_task_id AND id = p_id FOR UPDATE;
    IF v_parent.state IS NULL OR v_d.id IS NULL OR v_d.state = 'ended' THEN
        RETURN '{}'::jsonb;
    END IF;
    v_who := coalesce('peer ' || v_d.peer || ' (task ' || v_d.remote_id || ')',
                      'child run ' || v_d.child_id);
    UPDATE delegations SET remote_state = p_state, updated_at = clock_timestamp()
    WHERE task_id = p_task_id AND id = p_id;
    v_via := 'via.' || p_id || '.' || (p_request ->> 'id');
    -- The peer refused the answer a person gave to this request and still asks it: the
    -- person is asked again, told why (a new request; the refused one stays decided).
    IF p_request IS NOT NULL AND v_d.peer IS NOT NULL THEN
        SELECT count(*), (array_agg(last_error ORDER BY updated_at DESC))[1]
        INTO v_refused, v_why
        FROM delegation_answers
        WHERE task_id = p_task_id AND delegation_id = p_id AND state = 'refused'
          AND approval ->> 'id' = p_request ->> 'id';
    END IF;
    v_asks := format('The %s asks: %s', v_who, p_request ->> 'summary');
    IF coalesce(v_refused, 0) > 0 THEN
        v_via := v_via || '.' || (v_refused + 1);
        v_asks := format('The %s did not take the answer it was given (%s); it still asks: %s',
                         v_who, left(v_why, 300), p_request ->> 'summary');
    END IF;
    IF p_request IS NOT NULL AND v_parent.state = 'working'
       AND NOT EXISTS (SELECT 1 FROM pauses WHERE task_id = p_task_id AND id = v_via) THEN
        INSERT INTO pauses (task_id, id, kind, segment, item_id, attempt, summary, details,
                            options, on_expiry, expires_at)
        VALUES (p_task_id, v_via, 'delegated_request', v_parent.segment, v_d.item_id,
                v_d.attempt, v_asks,
                jsonb_build_object('delegation', p_id, 'request', p_request),
                coalesce(p_request -> 'options', '["approve", "reject"]'::jsonb),
                coalesce(p_request ->> 'on_expiry', 'reject'),
                coalesce((p_request ->> 'expires_at')::timestamptz,
                         clock_timestamp() + interval '7 days'));
        PERFORM apply_task_change(
            p_task_id,
            jsonb_build_object(
                'transitions', jsonb_build_array(jsonb_build_object(
                    'item_id', v_d.item_id, 'attempt', v_d.attempt,
                    'from_state', 'working', 'to_state', 'input_required',
                    'reason', format('the %s asks (`%s`): %s', v_who, v_via,
                                     left(p_request ->> 'summary', 500)))),
                'state', 'input_required',
                'status_text', format('Waiting for a person: %s Reply with one of: %s',
                                      v_asks, coalesce(p_request -> 'options', '[]'::jsonb)),
                'status_data', (SELECT jsonb_build_object('approval_request', jsonb_build_object(
                                    'id', id, 'kind', kind, 'summary', summary,
                                    'details', details, 'options', options,
                                    'expires_at', expires_at, 'on_expiry', on_expiry))
                                FROM pauses WHERE task_id = p_task_id AND id = v_via)),
            v_parent.transition_seq, v_parent.event_seq);
    ELSIF p_request IS NULL AND v_parent.state = 'input_required' AND EXISTS (
        SELECT 1 FROM pauses WHERE task_id = p_task_id AND decision IS NULL
                               AND id LIKE 'via.' || p_id || '.%') THEN
        -- Answered where it was asked (or it ended): the parent no longer waits for it.
        UPDATE pauses SET decision = 'ended', decided_how = 'ended',
                          decided_at = clock_timestamp(),
                          note = 'the delegate no longer asks'
        WHERE task_id = p_task_id AND decision IS NULL AND id LIKE 'via.' || p_id || '.%';
        PERFORM apply_task_change(
            p_task_id,
            jsonb_build_object(
                'transitions', jsonb_build_array(jsonb_build_object(
                    'from_state', 'input_required', 'to_state', 'working',
                    'reason', format('the %s no longer asks', v_who))),
                'state', 'working',
                'status_text', format('Working: waiting for the %s', v_who)),
            v_parent.transition_seq, v_parent.event_seq);
    END IF;
    IF p_result IS NULL THEN
        UPDATE tasks SET metadata = metadata
                         || jsonb_build_object('delegations', delegations_json(p_task_id))
        WHERE id = p_task_id;
        PERFORM pg_notify('a2a_task_events', p_task_id);  -- the read caches
        RETURN '{}'::jsonb;
    END IF;
    UPDATE delegations
    SET state = 'ended', result = p_result, ended_at = clock_timestamp(),
        updated_at = clock_timestamp()
    WHERE task_id = p_task_id AND id = p_id;
    SELECT state, transition_seq, event_seq, segment INTO v_parent
    FROM tasks WHERE id = p_task_id;
    IF v_parent.state IN ('completed', 'failed', 'canceled', 'rejected') THEN
        RETURN '{}'::jsonb;
    END IF;
    -- The parent goes on: its next segment (started by whoever called this).
    UPDATE tasks SET segment = segment + 1,
                     metadata = metadata
                         || jsonb_build_object('delegations', delegations_json(p_task_id))
    WHERE id = p_task_id;
    PERFORM apply_task_change(
        p_task_id,
        jsonb_build_object('transitions', jsonb_build_array(jsonb_build_object(
            'item_id', v_d.item_id, 'attempt', v_d.attempt,
            'from_state', v_parent.state, 'to_state', v_parent.state,
            'reason', format('the %s ended: %s', v_who, p_result ->> 'state')))),
        v_parent.transition_seq, v_parent.event_seq);
    RETURN jsonb_build_object('segment', v_parent.segment + 1);
END
$$;

-- A peer answered that it cannot take the answer a person gave here to its question (decided
-- there meanwhile, or not something the key we present may answer): the answer is not sent
-- again, and the person reads why on our task; if the peer still asks, the next look at its
-- task asks the person again (`delegation_changed()`).
CREATE OR REPLACE FUNCTION delegation_answer_refused(p_task_id text, p_pause_id text, p_why text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_parent record;
    v_a delegation_answers%ROWTYPE;
    v_d delegations%ROWTYPE;
BEGIN
    SELECT state, transition_seq, event_seq INTO v_parent
    FROM tasks WHERE id = p_task_id FOR UPDATE;
    UPDATE delegation_answers
    SET state = 'refused', tries = tries + 1, last_error = left(p_why, 1000),
        updated_at = clock_timestamp()
    WHERE task_id = p_task_id AND pause_id = p_pause_id AND state = 'pending'
    RETURNING * INTO v_a;
    IF v_a.pause_id IS NULL OR v_parent.state IS NULL
       OR v_parent.state IN ('completed', 'failed', 'canceled', 'rejected') THEN
        RETURN;
    END IF;
    SELECT * INTO v_d FROM delegations WHERE task_id = p_task_id AND id = v_a.delegation_id;
    PERFORM apply_task_change(
        p_task_id,
        jsonb_build_object('transitions', jsonb_build_array(jsonb_build_object(
            'item_id', v_d.item_id, 'attempt', v_d.attempt,
            'from_state', v_parent.state, 'to_state', v_parent.state,
            'reason', format('the peer %s (task %s) did not take the answer to `%s` (%s): %s',
                             v_d.peer, v_d.remote_id, p_pause_id, v_a.approval ->> 'decision',
                             left(p_why, 500))))),
        v_parent.transition_seq, v_parent.event_seq);
END
$$;

-- A child run changed: mirror what matters onto its parent's delegation (see above). Its end
-- counts once the run closed its record (its report is written).
CREATE OR REPLACE FUNCTION mirror_to_parent(p_child text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_child record;
    v_id text;
BEGIN
    SELECT id, parent_id, state, status_data, status_text, report, plan INTO v_child
    FROM tasks WHERE id = p_child;
    SELECT id INTO v_id FROM delegations
    WHERE task_id = v_child.parent_id AND child_id = p_child AND state = 'pending';
    IF v_id IS NULL THEN
        RETURN;
    END IF;
    PERFORM delegation_changed(
        v_child.parent_id, v_id, v_child.state,
        CASE WHEN v_child.state = 'input_required'
             THEN v_child.status_data -> 'approval_request' END,
        CASE WHEN v_child.state IN ('completed', 'failed', 'canceled', 'rejected')
                  AND v_child.report IS NOT NULL
             THEN jsonb_build_object('state', v_child.state, 'status', v_child.status_text,
                                     'report', v_child.report, 'plan', v_child.plan) END);
END
$$;

-- One step's result kept for a segment's workflow (persistence/steps.py), written only while
-- the execution `p_owner` still owns its DBOS workflow (the owner token DBOS gave it, as
-- DBOS's own step records check) and the workflow is not cancelled; the workflow's row is
-- share-locked until the commit, so a hand-off cannot land between the check and the write.
-- The commit need not wait for the disk: a row lost with the database's last moments is a
-- step run again, which finds its own records, as after a crash between a step's record and
-- its keep; any later commit flushes it with its own. Returns one row always: the
-- workflow's status and owner, whether this call wrote, and the name kept at the position
-- before it (NULLs and false for a NULL p_step_no: nothing to keep, as step_view asks it
-- when no step waits for its keep).
CREATE OR REPLACE FUNCTION keep_step_result(
    p_task_id text, p_segment integer, p_workflow_id text, p_owner text, p_step_no integer,
    p_name text, p_result json, p_failure text,
    OUT status text, OUT owner text, OUT written boolean, OUT existing text
)
LANGUAGE plpgsql AS $$
BEGIN
    written := false;
    IF p_step_no IS NULL THEN
        RETURN;
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT w.status, w.owner_xid INTO status, owner
    FROM dbos.workflow_status w WHERE w.workflow_uuid = p_workflow_id
    FOR SHARE OF w;
    SELECT r.name INTO existing FROM step_results r
    WHERE r.task_id = p_task_id AND r.segment = p_segment AND r.step_no = p_step_no;
    IF FOUND OR status IS NULL OR status = 'CANCELLED' OR owner IS DISTINCT FROM p_owner THEN
        RETURN;
    END IF;
    INSERT INTO step_results (task_id, segment, step_no, name, result, failure)
    VALUES (p_task_id, p_segment, p_step_no, p_name, p_result, p_failure)
    ON CONFLICT (task_id, segment, step_no) DO NOTHING;
    written := FOUND;
    IF NOT written THEN
        SELECT r.name INTO existing FROM step_results r
        WHERE r.task_id = p_task_id AND r.segment = p_segment AND r.step_no = p_step_no;
    END IF;
END
$$;
