-- 0003: idempotency keys, committed with the mutations made under them
-- (engine.IdempotencyStore).

-- One row per key (already scoped by the caller: the API scopes it to
-- caller, method and path). A request claims its key (state in_flight,
-- a random token, a claim expiry it renews while it runs); every write
-- transaction it makes under the key checks the token and records itself
-- in idempotency_steps, in that same transaction; its answer then moves
-- the row to done with the response kept for replays. A claim whose
-- holder died expires, and the next request with the key takes it over
-- (new token: the old holder's late writes are refused). The row lives
-- until expires_at (created_at + TTL, 24 h by default); expired rows are
-- treated as absent and deleted by maintenance.
CREATE TABLE idempotency_keys (
    key              TEXT    NOT NULL PRIMARY KEY,
    request_hash     TEXT    NOT NULL,
    state            TEXT    NOT NULL,            -- in_flight | done
    token            TEXT    NOT NULL DEFAULT '', -- the claim; '' when done
    claim_expires_at INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    response         BLOB
);

CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

-- The writes committed under a key that has no response yet, each with
-- the result its store method returned (JSON), so that a request taking
-- a dead holder's claim over answers them instead of running them again.
-- Deleted when the key's response is stored.
CREATE TABLE idempotency_steps (
    key        TEXT    NOT NULL,
    step       TEXT    NOT NULL,
    result     TEXT,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (key, step)
) WITHOUT ROWID;
