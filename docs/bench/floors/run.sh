#!/bin/bash
# Bulk retry floors against Sluice's bulk retry, interleaved, on this host.
# Each round seeds JOBS dead jobs with sluice-bench, then times:
#   redis_floor   redis_retry_floor.lua over a seeded namespace (one call)
#   redis_sluice  sluice-bench deadletter --reuse on another namespace
#   pg_narrow     floor_narrow(events) on a three-column job table
#   pg_statement  floor_retry: Sluice's batch statement by hand, server side
#   pg_sluice     sluice-bench deadletter --reuse on another schema
# Needs: BIN (a folder with sluice and sluice-bench built from this repo),
# a Redis at REDIS (a private one: the floor blocks it for seconds), and
# PostgreSQL at PG (database test). Prints one line a measurement.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-/tmp/sb}
REDIS=${REDIS:-127.0.0.1:6390}
PG=${PG:-postgres://root@127.0.0.1:5432/test?sslmode=disable}
JOBS=${JOBS:-200000}
ROUNDS=${ROUNDS:-2}
rport=${REDIS##*:}; rhost=${REDIS%:*}
rcli() { redis-cli -h "$rhost" -p "$rport" "$@"; }
rcpu() { rcli info cpu | awk -F: '/used_cpu_(sys|user):/{s+=$2} END{printf "%.6f", s}'; }
psq() { PGOPTIONS="-c jit=off" psql "$PG" -X -q "$@"; }
now() { date -u +%T; }
load() { cut -d' ' -f1 /proc/loadavg; }
seed() { "$BIN/sluice-bench" deadletter --store "$1" --jobs "$JOBS" --no-retry >/dev/null 2>&1; }
sluice_retry() {
	"$BIN/sluice-bench" deadletter --store "$1" --jobs "$JOBS" --reuse 2>/dev/null | tr ' ' '\n' |
		grep -E '^(retry_all_per_sec|retry_batches|redis_cpu_us_per_retried_job|retry_verify)=' | tr '\n' ' '
}
psq -f "$here/pg_retry_floor.sql"
for r in $(seq "$ROUNDS"); do
	ns=floor$r$$
	seed "redis://$REDIS/0?ns=$ns&read_timeout=2m"
	c0=$(rcpu); t0=$(date +%s.%N)
	out=$(rcli --eval "$here/redis_retry_floor.lua" x , "{$ns}:" 1000 | head -1)
	t1=$(date +%s.%N); c1=$(rcpu)
	echo "$(now) round=$r redis_floor load=$(load) jobs=$out per_sec=$(echo "$out/($t1-$t0)" | bc) redis_cpu_us_per_job=$(echo "($c1-$c0)*1000000/$out" | bc)"
	rcli --scan --pattern "{$ns}*" | xargs -r -n 1000 redis-cli -h "$rhost" -p "$rport" unlink >/dev/null

	ns=sluice$r$$
	seed "redis://$REDIS/0?ns=$ns&read_timeout=2m"
	echo "$(now) round=$r redis_sluice load=$(load) $(sluice_retry "redis://$REDIS/0?ns=$ns&read_timeout=2m")"
	rcli --scan --pattern "{$ns}*" | xargs -r -n 1000 redis-cli -h "$rhost" -p "$rport" unlink >/dev/null

	psq -c "CALL public.floor_narrow_setup($JOBS)" -c "CHECKPOINT"
	echo "$(now) round=$r pg_narrow load=$(load) $(psq -c 'CALL public.floor_narrow(true, 1000)' 2>&1 | grep -o 'floor_narrow.*')"
	psq -c "DROP SCHEMA floor_narrow CASCADE" 2>/dev/null

	s=floor$r$$
	"$BIN/sluice" migrate --store "$PG&schema=$s" >/dev/null 2>&1
	seed "$PG&schema=$s"
	psq -c CHECKPOINT
	echo "$(now) round=$r pg_statement load=$(load) $(psq -c "CALL public.floor_retry('$s', true, 1000)" 2>&1 | grep -o 'floor_retry.*')"
	psq -c "DROP SCHEMA $s CASCADE" 2>/dev/null

	s=sluice$r$$
	"$BIN/sluice" migrate --store "$PG&schema=$s" >/dev/null 2>&1
	seed "$PG&schema=$s"
	psq -c CHECKPOINT
	echo "$(now) round=$r pg_sluice load=$(load) $(sluice_retry "$PG&schema=$s")"
	psq -c "DROP SCHEMA $s CASCADE" 2>/dev/null
done
