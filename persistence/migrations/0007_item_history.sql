-- Each attempt at an item, kept: its run and verify evidence (command, exit code, duration,
-- output tail, how many times it ran) and how the attempt ended.

ALTER TABLE items ADD COLUMN history jsonb NOT NULL DEFAULT '[]'::jsonb;
