-- A push config remembers the A2A version of the client that made it: a 0.3 receiver gets
-- the Task as of each event (0.3's push body), a 1.0 receiver the StreamResponse. Configs
-- made before this were all made by 1.0 clients.

ALTER TABLE push_configs
    ADD COLUMN protocol text NOT NULL DEFAULT '1.0' CHECK (protocol IN ('0.3', '1.0'));
