-- The floor of a bulk retry on PostgreSQL, as server-side procedures (no
-- client, no round trips): run.sh calls them.
--
-- floor_retry(schema, events, batch): Sluice's own batch statement by
-- hand, on a schema that sluice-bench deadletter seeded: the jobs of
-- each id range of `batch` move from archived to available, with their
-- timeline events when `events`, a transaction a batch. The state is
-- tested as an expression so that the range is read from the primary
-- key: as a column it took jobs_state_changed, and read every archived
-- entry of it for each batch.
--
-- floor_narrow(events, batch): the least any design can write: a job row
-- of three columns (id, state, state changed at) with its primary key and
-- one partial index, and, when `events`, an event row of four columns
-- with its primary key and its (job, id) index, in schema floor_narrow
-- (200,000 jobs, made by floor_narrow_setup).
CREATE OR REPLACE PROCEDURE public.floor_retry(s text, events boolean, bs int) LANGUAGE plpgsql AS $$
DECLARE
  lo text; hi text; n bigint := 0; t0 timestamptz; nowns bigint; c bigint; bounds text[]; i int;
  ev text := '';
BEGIN
  EXECUTE format('SELECT array_agg(id ORDER BY id) FROM (SELECT id, row_number() OVER (ORDER BY id) rn FROM %I.jobs) x WHERE (rn - 1) %% %s = 0', s, bs) INTO bounds;
  IF events THEN
    ev := format($e$, ev AS (INSERT INTO %1$I.job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
          SELECT id, 'retried', $1, 'floor', 'archived', 'available', attempt, '' FROM up ORDER BY id)$e$, s);
  END IF;
  t0 := clock_timestamp();
  FOR i IN 1..array_length(bounds, 1) LOOP
    lo := bounds[i];
    hi := CASE WHEN i < array_length(bounds, 1) THEN bounds[i + 1] ELSE chr(1114111) END;
    nowns := (extract(epoch from clock_timestamp()) * 1e9)::bigint;
    EXECUTE format($q$WITH up AS (UPDATE %1$I.jobs SET state = 'available', max_attempts = greatest(max_attempts, attempt + 1),
        crash_attempt = 0, scheduled_at = $1, finalized_at = NULL, terminal_reason = '', lease_id = NULL, lease_worker = NULL,
        lease_expires_at = NULL, state_changed_at = $1, version = version + 1,
        deadline = CASE WHEN deadline <= $1 THEN NULL ELSE deadline END
        WHERE id >= $2 AND id < $3 AND (state || '') = 'archived' RETURNING id, queue, attempt)%2$s
        SELECT count(*) FROM up$q$, s, ev) INTO c USING nowns, lo, hi;
    n := n + c;
    COMMIT;
  END LOOP;
  RAISE NOTICE 'floor_retry schema=% events=% jobs=% seconds=% per_sec=%', s, events, n,
    round(extract(epoch from clock_timestamp() - t0)::numeric, 2), round(n / extract(epoch from clock_timestamp() - t0));
END $$;

CREATE OR REPLACE PROCEDURE public.floor_narrow_setup(jobs int) LANGUAGE plpgsql AS $$
BEGIN
  DROP SCHEMA IF EXISTS floor_narrow CASCADE;
  CREATE SCHEMA floor_narrow;
  CREATE TABLE floor_narrow.jobs (id text COLLATE "C" PRIMARY KEY, state text NOT NULL, sca bigint NOT NULL);
  CREATE INDEX jobs_available ON floor_narrow.jobs (sca, id) WHERE state = 'available';
  CREATE TABLE floor_narrow.events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id text COLLATE "C" NOT NULL, at bigint NOT NULL, kind text NOT NULL);
  CREATE INDEX events_job ON floor_narrow.events (job_id, id);
  INSERT INTO floor_narrow.jobs SELECT lpad(i::text, 20, '0'), 'archived', i FROM generate_series(1, jobs) i;
  -- Each dead job has its death's event, as a seeded store's have.
  INSERT INTO floor_narrow.events (job_id, at, kind) SELECT id, 0, 'archived' FROM floor_narrow.jobs;
END $$;

CREATE OR REPLACE PROCEDURE public.floor_narrow(events boolean, bs int) LANGUAGE plpgsql AS $$
DECLARE n bigint := 0; c bigint; i int; total int; t0 timestamptz := clock_timestamp();
BEGIN
  SELECT count(*) INTO total FROM floor_narrow.jobs;
  FOR i IN 0..((total + bs - 1) / bs - 1) LOOP
    IF events THEN
      WITH up AS (UPDATE floor_narrow.jobs SET state = 'available', sca = (extract(epoch from clock_timestamp()) * 1e9)::bigint
        WHERE id > lpad((i * bs)::text, 20, '0') AND id <= lpad(((i + 1) * bs)::text, 20, '0') AND state = 'archived' RETURNING id),
      ev AS (INSERT INTO floor_narrow.events (job_id, at, kind) SELECT id, 1, 'retried' FROM up)
      SELECT count(*) INTO c FROM up;
    ELSE
      WITH up AS (UPDATE floor_narrow.jobs SET state = 'available', sca = (extract(epoch from clock_timestamp()) * 1e9)::bigint
        WHERE id > lpad((i * bs)::text, 20, '0') AND id <= lpad(((i + 1) * bs)::text, 20, '0') AND state = 'archived' RETURNING id)
      SELECT count(*) INTO c FROM up;
    END IF;
    n := n + c;
    COMMIT;
  END LOOP;
  RAISE NOTICE 'floor_narrow events=% jobs=% seconds=% per_sec=%', events, n,
    round(extract(epoch from clock_timestamp() - t0)::numeric, 2), round(n / extract(epoch from clock_timestamp() - t0));
END $$;
