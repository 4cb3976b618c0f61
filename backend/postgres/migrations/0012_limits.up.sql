-- 0011: concurrency limits across processes (backend.LimitStore). A claim
-- under a limit takes a transaction-scoped advisory lock per limit and
-- counts the running jobs it covers; no row here is written by claims or
-- finishes.
CREATE TABLE IF NOT EXISTS {s}.limits (
    scope       text    COLLATE "C" NOT NULL,
    name        text    COLLATE "C" NOT NULL,
    concurrency integer NOT NULL CHECK (concurrency >= 0),
    partition_key text  NOT NULL DEFAULT '',
    rate        integer NOT NULL DEFAULT 0 CHECK (rate >= 0),
    rate_window bigint  NOT NULL DEFAULT 0,
    updated_at  bigint  NOT NULL,
    updated_by  text    NOT NULL DEFAULT '',
    PRIMARY KEY (scope, name)
);

-- One row per start under a rate limit, inserted by the claim that starts
-- the job (never an update of one row), read for the limit's window and
-- pruned past it by the same claims, under the limit's advisory lock.
CREATE TABLE IF NOT EXISTS {s}.limit_starts (
    scope text   COLLATE "C" NOT NULL,
    name  text   COLLATE "C" NOT NULL,
    at    bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS limit_starts_at ON {s}.limit_starts (scope, name, at);
