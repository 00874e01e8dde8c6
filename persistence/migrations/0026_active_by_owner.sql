-- A caller's tasks that have not ended, counted at every submission when a limit of active
-- tasks per caller is set (A2A_AGENT_MAX_ACTIVE_TASKS).
CREATE INDEX tasks_owner_active ON tasks (owner)
    WHERE state IN ('submitted', 'working', 'input_required', 'auth_required');
