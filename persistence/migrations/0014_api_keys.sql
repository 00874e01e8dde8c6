-- API keys: each belongs to a principal (the owner of the tasks it creates) and carries
-- scopes. Only a hash of the secret part is kept.

CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    principal   text NOT NULL,
    name        text NOT NULL DEFAULT '',
    scopes      text[] NOT NULL,
    secret_hash text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    revoked_at  timestamptz
);
