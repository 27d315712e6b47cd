#!/usr/bin/env bash
# PostgreSQL 15 for the benchmark, as .ci/run starts it: the cluster started if offline, role
# `tessera` (LOGIN CREATEDB) and database `tessera_bench` created if missing. The benchmark then
# drops and recreates tessera_bench itself (as `tessera`, its owner) on every run.
set -euo pipefail
PG_VERSION=15
PG_USER=tessera
PG_PASSWORD=tessera
PG_DB=tessera_bench

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
as_postgres() { as_root runuser -u postgres -- "$@"; }

if ! command -v pg_ctlcluster >/dev/null; then
    echo "the benchmark needs PostgreSQL ${PG_VERSION} (pg_ctlcluster not found)" >&2
    exit 1
fi
# Up to 90 connections at once (Tessera with 2 workers beside Tessera with 1, 30 a process, or
# Tessera beside the L2 limit's pool): room for 200, set before the cluster starts, as CI does.
PG_CONF="/etc/postgresql/${PG_VERSION}/main/conf.d/tessera-ci.conf"
if [ ! -f "${PG_CONF}" ]; then
    echo "max_connections = 200" | as_root tee "${PG_CONF}" >/dev/null
    if pg_lsclusters --no-header | grep -q "^${PG_VERSION} *main .*online"; then
        as_root pg_ctlcluster "${PG_VERSION}" main restart
    fi
fi
if ! pg_lsclusters --no-header | grep -q "^${PG_VERSION} *main .*online"; then
    as_root pg_ctlcluster "${PG_VERSION}" main start
fi
for _ in $(seq 1 30); do
    pg_isready -q -h 127.0.0.1 -p 5432 && break
    sleep 1
done
pg_isready -h 127.0.0.1 -p 5432 || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }

as_postgres psql -v ON_ERROR_STOP=1 -q <<SQL
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${PG_USER}') THEN
        CREATE ROLE ${PG_USER} LOGIN CREATEDB PASSWORD '${PG_PASSWORD}';
    END IF;
END
\$\$;
SQL
if ! as_postgres psql -tAc "SELECT 1 FROM pg_database WHERE datname = '${PG_DB}'" | grep -q 1; then
    as_postgres createdb -O "${PG_USER}" "${PG_DB}"
fi
