-- The schema of migrations 1 to 26 in one file, for a fresh install, which then gets the
-- migrations after it (persistence/migrate.py, SCHEMA_SQL_VERSION). Keep it equal to those
-- migrations in order; tests/test_migrations.py compares a fresh install with one made
-- migration by migration.

CREATE TABLE tasks (
    id             text PRIMARY KEY,
    owner          text NOT NULL DEFAULT '',
    context_id     text NOT NULL,
    state          text NOT NULL CHECK (state IN ('submitted', 'working', 'input_required',
                        'auth_required', 'completed', 'failed', 'canceled', 'rejected')),
    status_text    text,
    status_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    goal           text NOT NULL,
    history        jsonb NOT NULL DEFAULT '[]'::jsonb,
    metadata       jsonb NOT NULL DEFAULT '{}'::jsonb,
    plan           jsonb,
    report         jsonb,
    transition_seq integer NOT NULL DEFAULT 0,
    event_seq      integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    workspace_fingerprint text,
    checkpoint_sha text,
    budget         jsonb NOT NULL DEFAULT '{}'::jsonb,
    segment        integer NOT NULL DEFAULT 0,
    policy         jsonb NOT NULL DEFAULT '{}'::jsonb,
    status_data    jsonb,
    waited_s       double precision NOT NULL DEFAULT 0,
    seed           jsonb,
    base_sha       text,
    trace_context  text,
    compacted_at   timestamptz,
    parent_id      text
);
CREATE INDEX tasks_owner_status_at ON tasks (owner, status_at DESC, id DESC);
CREATE INDEX tasks_owner_context ON tasks (owner, context_id);
CREATE INDEX tasks_unfinished ON tasks (updated_at) WHERE state IN ('submitted', 'working');
CREATE INDEX tasks_open_by_age ON tasks (created_at)
    WHERE state IN ('submitted', 'working', 'input_required');
CREATE INDEX tasks_resumed ON tasks (updated_at) WHERE segment > 0 AND report IS NULL;
CREATE INDEX tasks_parent ON tasks (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX tasks_ended ON tasks (status_at)
    WHERE state IN ('completed', 'failed', 'canceled', 'rejected');
CREATE INDEX tasks_owner_active ON tasks (owner)
    WHERE state IN ('submitted', 'working', 'input_required', 'auth_required');

CREATE TABLE items (
    task_id          text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    position         integer NOT NULL,
    item_id          text NOT NULL,
    title            text NOT NULL,
    run              text,
    verify_command   text NOT NULL,
    verify_timeout_s integer NOT NULL,
    max_attempts     integer NOT NULL CHECK (max_attempts >= 1),
    status           text NOT NULL DEFAULT 'pending',
    attempts         integer NOT NULL DEFAULT 0,
    evidence         jsonb,
    commit_sha       text,
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    failures         integer NOT NULL DEFAULT 0,
    history          jsonb NOT NULL DEFAULT '[]'::jsonb,
    run_timeout_s    integer,
    timeout_s        integer,
    started_at       timestamptz,
    irreversible     boolean NOT NULL DEFAULT false,
    ask              text,
    facts            jsonb NOT NULL DEFAULT '[]'::jsonb,
    precheck         boolean NOT NULL DEFAULT true,
    verify_independent boolean NOT NULL DEFAULT false,
    delegate_to      jsonb,
    -- What the plan shows of it but its history (persistence/views.py: stored_view).
    view             jsonb,
    PRIMARY KEY (task_id, item_id),
    UNIQUE (task_id, position),
    CONSTRAINT items_status_check
        CHECK (status IN ('pending', 'in_progress', 'verifying', 'done', 'failed', 'skipped',
                          'regressed', 'interrupted'))
);

-- What `migrate` looks for at every start (rows from before views): an index probe.
CREATE INDEX items_without_view ON items (task_id, item_id) WHERE view IS NULL;

CREATE TABLE transitions (
    task_id    text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    item_id    text,
    attempt    integer,
    from_state text,
    to_state   text NOT NULL,
    reason     text NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, seq)
);

CREATE TABLE events (
    task_id text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq     integer NOT NULL,
    body    jsonb NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, seq)
);

CREATE TABLE effects (
    key          text PRIMARY KEY,
    task_id      text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    item_id      text,
    attempt      integer,
    step         text NOT NULL,
    status       text NOT NULL CHECK (status IN ('started', 'completed')),
    runs         integer NOT NULL DEFAULT 1,
    result       jsonb,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    completed_at timestamptz
);
CREATE INDEX effects_task ON effects (task_id);

CREATE TABLE workers (
    executor_id  text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    role         text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE checkpoints (
    task_id    text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    sha        text NOT NULL,
    bundle     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, seq)
);

CREATE TABLE model_calls (
    key                text PRIMARY KEY,
    task_id            text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    item_id            text,
    attempt            integer,
    purpose            text NOT NULL,
    model              text NOT NULL,
    stop_reason        text NOT NULL,
    input_tokens       integer NOT NULL,
    output_tokens      integer NOT NULL,
    cache_read_tokens  integer NOT NULL,
    cache_write_tokens integer NOT NULL,
    at                 timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX model_calls_task ON model_calls (task_id);

CREATE TABLE budget_charges (
    key      text PRIMARY KEY,
    task_id  text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    kind     text NOT NULL CHECK (kind IN ('reservation', 'model', 'tool', 'command', 'child')),
    tool     text,
    tokens   bigint NOT NULL DEFAULT 0,
    usd      numeric(14, 6) NOT NULL DEFAULT 0,
    actions  integer NOT NULL DEFAULT 0,
    at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX budget_charges_task ON budget_charges (task_id, at);

CREATE TABLE budget_alerts (
    task_id   text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    dimension text NOT NULL,
    threshold integer NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, dimension, threshold)
);

CREATE TABLE messages (
    owner       text NOT NULL,
    message_id  text NOT NULL,
    task_id     text NOT NULL,
    digest      text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (owner, message_id),
    CONSTRAINT messages_task_id_fkey FOREIGN KEY (task_id) REFERENCES tasks (id)
        ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX messages_task ON messages (task_id);

CREATE TABLE pauses (
    task_id      text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    id           text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('irreversible_action', 'plan_change',
                      'budget_threshold', 'repeated_failure', 'plan_review', 'question',
                      'stale_fact', 'weak_check', 'regression', 'delegated_request')),
    segment      integer NOT NULL,
    item_id      text,
    attempt      integer,
    summary      text NOT NULL,
    details      jsonb NOT NULL DEFAULT '{}'::jsonb,
    options      jsonb NOT NULL,
    on_expiry    text NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at   timestamptz NOT NULL,
    decision     text,
    note         text,
    decided_by   text,
    decided_how  text CHECK (decided_how IN ('reply', 'expired', 'ended')),
    decided_at   timestamptz,
    message_id   text,
    PRIMARY KEY (task_id, id)
);
CREATE UNIQUE INDEX pauses_one_open ON pauses (task_id) WHERE decision IS NULL;
CREATE INDEX pauses_expiring ON pauses (expires_at) WHERE decision IS NULL;

CREATE TABLE notes (
    task_id    text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    text       text NOT NULL,
    message_id text NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, seq)
);

CREATE TABLE facts (
    task_id       text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    key           text NOT NULL,
    value         text NOT NULL,
    source        text NOT NULL,
    check_command text,
    max_age_s     integer,
    checked_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, key)
);

CREATE TABLE push_configs (
    task_id         text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    id              text NOT NULL,
    owner           text NOT NULL,
    url             text NOT NULL,
    token           text,
    authentication  jsonb,
    acked_seq          integer NOT NULL DEFAULT 0,
    state           text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'dead')),
    attempts        integer NOT NULL DEFAULT 0,
    delivered       integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    failures        integer NOT NULL DEFAULT 0,  -- every failed attempt (0022)
    dead_lettered   integer NOT NULL DEFAULT 0,  -- every time it went dead
    -- The A2A version of the client that made it: the push body's shape (0023).
    protocol        text NOT NULL DEFAULT '1.0' CHECK (protocol IN ('0.3', '1.0')),
    PRIMARY KEY (task_id, id)
);
CREATE INDEX push_configs_due ON push_configs (next_attempt_at) WHERE state = 'active';

-- Counters that outlive their rows: what retention deletes is folded in first (0022).
CREATE TABLE metric_totals (
    name  text NOT NULL,
    label text NOT NULL DEFAULT '',
    value double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (name, label)
);

CREATE TABLE signing_keys (
    kid         text PRIMARY KEY,
    private_pem text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- SQL functions live in functions.sql, applied after the tables on every migrate.

CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    principal   text NOT NULL,
    name        text NOT NULL DEFAULT '',
    scopes      text[] NOT NULL,
    secret_hash text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    revoked_at  timestamptz
);

CREATE TABLE task_files (
    task_id    text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('input', 'output')),
    name       text NOT NULL,
    media_type text NOT NULL,
    filename   text,
    size       bigint NOT NULL,
    sha256     text NOT NULL,
    body       bytea,
    url        text,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, kind, name)
);

CREATE TABLE takeovers (
    id            bigserial PRIMARY KEY,
    dead_executor text NOT NULL,
    by_executor   text NOT NULL,
    runs          integer NOT NULL,
    at            timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE delegations (
    task_id      text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    id           text NOT NULL,
    item_id      text,
    attempt      integer,
    peer         text,
    child_id     text,
    remote_id    text,
    goal         text NOT NULL,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'ended')),
    remote_state text,
    result       jsonb,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at     timestamptz,
    PRIMARY KEY (task_id, id)
);
CREATE INDEX delegations_child ON delegations (child_id) WHERE child_id IS NOT NULL;
CREATE INDEX delegations_open_peers ON delegations (updated_at)
    WHERE state = 'pending' AND peer IS NOT NULL;

-- An answer to a peer's question, kept until the peer takes it (see 0021).
CREATE TABLE delegation_answers (
    task_id       text NOT NULL,
    delegation_id text NOT NULL,
    pause_id      text NOT NULL,
    message_id    text NOT NULL,
    approval      jsonb NOT NULL,
    state         text NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'sent', 'refused')),
    remote_state  text,
    tries         integer NOT NULL DEFAULT 0,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, pause_id),
    FOREIGN KEY (task_id, delegation_id) REFERENCES delegations (task_id, id) ON DELETE CASCADE
);
CREATE INDEX delegation_answers_pending ON delegation_answers (updated_at)
    WHERE state = 'pending';
