-- An item whose attempt was under way when its run ended (a cancel, a budget stop, the
-- watchdog, a failure elsewhere) says so: `interrupted`, with that attempt's evidence in its
-- history, instead of staying `in_progress` in a run that is over.

ALTER TABLE items DROP CONSTRAINT items_status_check;
ALTER TABLE items ADD CONSTRAINT items_status_check
    CHECK (status IN ('pending', 'in_progress', 'verifying', 'done', 'failed', 'skipped',
                      'regressed', 'interrupted'));
