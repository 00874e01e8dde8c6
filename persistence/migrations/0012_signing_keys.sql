-- The keys push notifications are signed with: shared by every process on this database,
-- so a receiver verifies a notification from any replica with the same JWKS.

CREATE TABLE signing_keys (
    kid         text PRIMARY KEY,
    private_pem text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
