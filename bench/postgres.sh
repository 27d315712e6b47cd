#!/usr/bin/env bash
# The machine's PostgreSQL 15 for the benchmark: started if stopped, role `tessera` (CREATEDB)
# ready. The benchmark creates and drops its own database, tessera_bench.
set -euo pipefail
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi; }
if ! pg_lsclusters --no-header | grep -q "^15 *main .*online"; then
    if [ "$(id -u)" = 0 ]; then pg_ctlcluster 15 main start; else sudo pg_ctlcluster 15 main start; fi
fi
for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
as_postgres psql -v ON_ERROR_STOP=1 -q <<'SQL'
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tessera') THEN
        CREATE ROLE tessera LOGIN CREATEDB PASSWORD 'tessera';
    END IF;
END
$$;
SQL
