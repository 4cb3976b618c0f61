-- 0011: concurrency limits across processes (backend.LimitStore). A claim
-- under a limit takes a transaction-scoped advisory lock per limit and
-- counts the running jobs it covers; no row here is written by claims or
-- finishes.
CREATE TABLE IF NOT EXISTS {s}.limits (
    scope       text    COLLATE "C" NOT NULL,
    name        text    COLLATE "C" NOT NULL,
    concurrency integer NOT NULL CHECK (concurrency > 0),
    partition_key text  NOT NULL DEFAULT '',
    updated_at  bigint  NOT NULL,
    updated_by  text    NOT NULL DEFAULT '',
    PRIMARY KEY (scope, name)
);
