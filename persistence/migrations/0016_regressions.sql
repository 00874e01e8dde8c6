-- Regressions: after the last item (and every `reverifyEvery` items) the checks of the items
-- marked done run again on the final workspace; an item whose check no longer passes is
-- `regressed`, and the policy reopens it, asks a person (a `regression` request) or fails.
-- A check may declare itself independent (read-only), so re-verification may run it beside
-- others.

ALTER TABLE items ADD COLUMN verify_independent boolean NOT NULL DEFAULT false;

ALTER TABLE items DROP CONSTRAINT items_status_check;
ALTER TABLE items ADD CONSTRAINT items_status_check
    CHECK (status IN ('pending', 'in_progress', 'verifying', 'done', 'failed', 'skipped',
                      'regressed'));

ALTER TABLE pauses DROP CONSTRAINT pauses_kind_check;
ALTER TABLE pauses ADD CONSTRAINT pauses_kind_check
    CHECK (kind IN ('irreversible_action', 'plan_change', 'budget_threshold',
                    'repeated_failure', 'plan_review', 'question', 'stale_fact',
                    'weak_check', 'regression'));
