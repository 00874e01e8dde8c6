-- What each step of a run's workflow returned, in the order the body took them: a workflow
-- run again after a crash is handed these instead of running its steps again (the replay
-- DBOS's own step records gave, at a third of a step's bookkeeping; engine/journal.py). A
-- step that failed keeps its failure, which the replay raises again.
CREATE TABLE step_results (
    task_id     text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    segment     integer NOT NULL,
    step_no     integer NOT NULL,   -- 1, 2, 3... within the segment's workflow
    name        text NOT NULL,      -- the step's name: a replay that meets another is refused
    result      json,               -- the StepResult as the body got it, its text as written
    failure     text,               -- or why the step failed, as the run's failure says it
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, segment, step_no),
    CHECK ((result IS NULL) <> (failure IS NULL))
);
