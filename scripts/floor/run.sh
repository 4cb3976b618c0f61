#!/usr/bin/env bash
# The floors of a bulk retry, interleaved with Sluice's own bulk retry, on
# this host: what any retry of a dead job must write, done with no client,
# no budget and nothing checked, beside what Sluice takes for the same
# jobs. scripts/bench floor runs it; see there for the arguments.
#
# Each round, for each store in STORES, seeds JOBS dead jobs with
# sluice-bench deadletter --no-retry, then times:
#   sqlite_narrow     a job row of three columns with one partial index and
#                     an event row of four (sqlite3, transactions of 1000)
#   sqlite_statement  Sluice's batch statement by hand on the seeded file
#   sqlite_sluice     sluice-bench deadletter --reuse on a copy of it
#   redis_floor       redis_retry_floor.lua over a seeded namespace
#   redis_sluice      sluice-bench deadletter --reuse on another namespace
#   pg_narrow         floor_narrow(true, 1000) on a three-column job table
#   pg_statement      floor_retry: Sluice's batch statement by hand, server side
#   pg_sluice         sluice-bench deadletter --reuse on another schema
# Prints one line a measurement.
#
# Needs BIN (a folder with sluice and sluice-bench built from this repo),
# sqlite3, psql with PostgreSQL at PG (its database gets the procedures of
# pg_retry_floor.sql in schema public), redis-cli with a Redis at REDIS: a
# private one, as the floor blocks the server for seconds (scripts/services
# can start one: redis-server --port 6390 --save '' --daemonize yes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:?BIN: a folder with sluice and sluice-bench}
REDIS=${REDIS:-127.0.0.1:6390}
PG=${PG:-postgres://root@127.0.0.1:5432/test?sslmode=disable}
JOBS=${JOBS:-200000}
ROUNDS=${ROUNDS:-2}
STORES=${STORES:-"sqlite postgres redis"}
rport=${REDIS##*:}
rhost=${REDIS%:*}
rcli() { redis-cli -h "$rhost" -p "$rport" "$@"; }
rcpu() { rcli info cpu | awk -F: '/used_cpu_(sys|user):/{s+=$2} END{printf "%.6f", s}'; }
runlink() { rcli --scan --pattern "{$1}*" | xargs -r -n 1000 redis-cli -h "$rhost" -p "$rport" unlink >/dev/null; }
psq() { PGOPTIONS="-c jit=off" psql "$PG" -X -q "$@"; }
now() { date -u +%T; }
load() { cut -d' ' -f1 /proc/loadavg; }
secs() { date +%s.%N; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.0f", n / (b - a) }'; }
seed() { "$BIN/sluice-bench" deadletter --store "$1" --jobs "$JOBS" --no-retry >/dev/null 2>&1; }
sluice_retry() {
	"$BIN/sluice-bench" deadletter --store "$1" --jobs "$JOBS" --reuse 2>/dev/null | tr ' ' '\n' |
		grep -E '^(retry_all_per_sec|retry_batches|retry_cpu_us_per_job|redis_cpu_us_per_retried_job|pg_backend_cpu_us_per_retried_job|retry_verify)=' | tr '\n' ' '
}
need() {
	command -v "$1" >/dev/null 2>&1 || { echo "floor: $1 is needed (for the $2 floor)" >&2; exit 2; }
}

# sqlite_batches FILE: the lower bound of every batch of 1000 jobs by id.
sqlite_batches() {
	sqlite3 "$1" "SELECT id FROM (SELECT id, row_number() OVER (ORDER BY id) rn FROM jobs) WHERE (rn - 1) % 1000 = 0 ORDER BY id"
}

# sqlite_statement FILE: Sluice's retry batch by hand, a transaction of
# 1000 jobs each: the job's row as the store's retry writes it, and its
# timeline event. The state is written +state, as the store writes it, so
# no index on state serves the batch: the error groups' index would make
# each batch walk every archived job.
sqlite_statement() {
	local file=$1 t
	t=$(date +%s%N)
	{
		echo "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
		sqlite_batches "$file" | awk -v t="$t" '
			function q(s) { gsub(/'\''/, "'\'''\''", s); return "'\''" s "'\''" }
			{ b[NR] = $0 }
			END {
				for (i = 1; i <= NR; i++) {
					w = "id >= " q(b[i]) (i < NR ? " AND id < " q(b[i + 1]) : "") " AND +state = '\''archived'\''"
					print "BEGIN IMMEDIATE;"
					print "INSERT INTO job_events (job_id, kind, at, actor, from_state, to_state, attempt, message) SELECT id, '\''retried'\'', " t ", '\''floor'\'', '\''archived'\'', '\''available'\'', attempt, '\'''\'' FROM jobs WHERE " w ";"
					print "UPDATE jobs SET state = '\''available'\'', max_attempts = CASE WHEN max_attempts < attempt + 1 THEN attempt + 1 ELSE max_attempts END, crash_attempt = 0, scheduled_at = " t ", finalized_at = NULL, terminal_reason = '\'''\'', lease_id = NULL, lease_worker = NULL, lease_expires_at = NULL, state_changed_at = " t ", version = version + 1, deadline = CASE WHEN deadline <= " t " THEN NULL ELSE deadline END WHERE " w ";"
					print "COMMIT;"
				}
			}'
	} >"$file.floor.sql"
	local t0 t1 n
	t0=$(secs)
	sqlite3 "$file" <"$file.floor.sql" >/dev/null
	t1=$(secs)
	n=$(sqlite3 "$file" "SELECT count(*) FROM jobs WHERE state = 'available'")
	rm -f "$file.floor.sql"
	echo "jobs=$n per_sec=$(rate "$n" "$t0" "$t1")"
}

# sqlite_narrow FILE: the least any design can write, on a fresh file.
sqlite_narrow() {
	local file=$1 t0 t1 n
	rm -f "$file" "$file-wal" "$file-shm"
	sqlite3 "$file" >/dev/null <<-EOF
		PRAGMA journal_mode=WAL;
		CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT NOT NULL, sca INTEGER NOT NULL) WITHOUT ROWID;
		CREATE INDEX jobs_available ON jobs (sca, id) WHERE state = 'available';
		CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, at INTEGER NOT NULL, kind TEXT NOT NULL);
		CREATE INDEX events_job ON events (job_id, id);
		WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < $JOBS)
		INSERT INTO jobs SELECT printf('%020d', i), 'archived', i FROM g;
		INSERT INTO events (job_id, at, kind) SELECT id, 0, 'archived' FROM jobs;
	EOF
	{
		echo "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
		awk -v n="$JOBS" 'BEGIN {
			for (lo = 0; lo < n; lo += 1000) {
				w = sprintf("id > %c%020d%c AND id <= %c%020d%c AND state = %carchived%c", 39, lo, 39, 39, lo + 1000, 39, 39, 39)
				print "BEGIN IMMEDIATE;"
				print "INSERT INTO events (job_id, at, kind) SELECT id, 1, " sprintf("%cretried%c", 39, 39) " FROM jobs WHERE " w ";"
				print "UPDATE jobs SET state = " sprintf("%cavailable%c", 39, 39) ", sca = 1 WHERE " w ";"
				print "COMMIT;"
			}
		}'
	} >"$file.floor.sql"
	t0=$(secs)
	sqlite3 "$file" <"$file.floor.sql" >/dev/null
	t1=$(secs)
	n=$(sqlite3 "$file" "SELECT count(*) FROM jobs WHERE state = 'available'")
	rm -f "$file" "$file-wal" "$file-shm" "$file.floor.sql"
	echo "jobs=$n per_sec=$(rate "$n" "$t0" "$t1")"
}

for s in $STORES; do
	case "$s" in
	sqlite) need sqlite3 SQLite ;;
	postgres) need psql PostgreSQL ;;
	redis) need redis-cli Redis ;;
	*) echo "floor: unknown store $s (want sqlite, postgres, redis)" >&2; exit 2 ;;
	esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case " $STORES " in *" postgres "*) psq -f "$here/pg_retry_floor.sql" ;; esac

for r in $(seq "$ROUNDS"); do
	for s in $STORES; do
		case "$s" in
		sqlite)
			echo "$(now) round=$r sqlite_narrow load=$(load) $(sqlite_narrow "$work/narrow.db")"
			seed "sqlite://$work/seed.db"
			cp "$work/seed.db" "$work/sluice.db"
			echo "$(now) round=$r sqlite_statement load=$(load) $(sqlite_statement "$work/seed.db")"
			echo "$(now) round=$r sqlite_sluice load=$(load) $(sluice_retry "sqlite://$work/sluice.db")"
			rm -f "$work"/*.db "$work"/*.db-wal "$work"/*.db-shm
			;;
		redis)
			ns=floor$r$$
			seed "redis://$REDIS/0?ns=$ns&read_timeout=2m"
			c0=$(rcpu)
			t0=$(secs)
			out=$(rcli --eval "$here/redis_retry_floor.lua" x , "{$ns}:" 1000 | head -1)
			t1=$(secs)
			c1=$(rcpu)
			echo "$(now) round=$r redis_floor load=$(load) jobs=$out per_sec=$(rate "$out" "$t0" "$t1") redis_cpu_us_per_job=$(awk -v a="$c0" -v b="$c1" -v n="$out" 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')"
			runlink "$ns"
			ns=sluice$r$$
			seed "redis://$REDIS/0?ns=$ns&read_timeout=2m"
			echo "$(now) round=$r redis_sluice load=$(load) $(sluice_retry "redis://$REDIS/0?ns=$ns&read_timeout=2m")"
			runlink "$ns"
			;;
		postgres)
			psq -c "CALL public.floor_narrow_setup($JOBS)" -c "CHECKPOINT"
			echo "$(now) round=$r pg_narrow load=$(load) $(psq -c 'CALL public.floor_narrow(true, 1000)' 2>&1 | grep -o 'floor_narrow.*')"
			psq -c "DROP SCHEMA floor_narrow CASCADE" 2>/dev/null
			sc=floor$r$$
			"$BIN/sluice" migrate --store "$PG&schema=$sc" >/dev/null 2>&1
			seed "$PG&schema=$sc"
			psq -c CHECKPOINT
			echo "$(now) round=$r pg_statement load=$(load) $(psq -c "CALL public.floor_retry('$sc', true, 1000)" 2>&1 | grep -o 'floor_retry.*')"
			psq -c "DROP SCHEMA $sc CASCADE" 2>/dev/null
			sc=sluice$r$$
			"$BIN/sluice" migrate --store "$PG&schema=$sc" >/dev/null 2>&1
			seed "$PG&schema=$sc"
			psq -c CHECKPOINT
			echo "$(now) round=$r pg_sluice load=$(load) $(sluice_retry "$PG&schema=$sc")"
			psq -c "DROP SCHEMA $sc CASCADE" 2>/dev/null
			;;
		esac
	done
done
