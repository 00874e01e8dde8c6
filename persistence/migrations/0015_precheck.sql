-- Checks that can fail: before an item's first attempt its verify command runs against the
-- workspace as it is; an item may opt out (precheck = false). A check that already passes
-- may ask a person (a weak_check request).

ALTER TABLE items ADD COLUMN precheck boolean NOT NULL DEFAULT true;

ALTER TABLE pauses DROP CONSTRAINT pauses_kind_check;
ALTER TABLE pauses ADD CONSTRAINT pauses_kind_check
    CHECK (kind IN ('irreversible_action', 'plan_change', 'budget_threshold',
                    'repeated_failure', 'plan_review', 'question', 'stale_fact',
                    'weak_check'));
