#!/usr/bin/env bash
# Debian's PgBouncer in transaction mode, configured by deploy/pgbouncer.ini, in front of the
# PostgreSQL on 127.0.0.1:5432, for the suite (make test-pgbouncer):
#   tests/deploy/pgbouncer.sh start DIR PORT URL   (DIR: its files; URL: the server's, as
#       TESSERA_TEST_DATABASE_URL; prints the same URL through PgBouncer)
#   tests/deploy/pgbouncer.sh stop DIR
# Only what docs/deploy.md says an operator writes is changed: the database line (every
# database, for the suite's per-worker ones), the port, the files' paths.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
command=$1 dir=$(realpath -m "$2")

as_owner() {  # PgBouncer refuses to run as root
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$command" in
start)
    port=$3 url=$4
    # postgresql+asyncpg://USER:PASSWORD@HOST:PORT/DB (the suite's; no '@' in the password)
    user=$(sed -E 's|^[^:]+://([^:@/]+):.*$|\1|' <<<"$url")
    password=$(sed -E 's|^[^:]+://[^:@/]+:([^@]*)@.*$|\1|' <<<"$url")
    command -v pgbouncer >/dev/null || { echo "pgbouncer is not installed: apt-get install pgbouncer" >&2; exit 1; }
    mkdir -p "$dir"
    printf '"%s" "%s"\n' "$user" "$password" > "$dir/userlist.txt"
    sed -e "s|^tessera = host=127.0.0.1 port=5432 dbname=tessera$|* = host=127.0.0.1 port=5432|" \
        -e "s|^listen_port = 6432$|listen_port = $port|" \
        -e "s|^auth_file = /etc/pgbouncer/userlist.txt$|auth_file = $dir/userlist.txt|" \
        -e "s|^server_idle_timeout = 600$|server_idle_timeout = 5|" \
        "$ROOT/deploy/pgbouncer.ini" > "$dir/pgbouncer.ini"
    grep -q "^\* = host=127.0.0.1" "$dir/pgbouncer.ini" && grep -q "^listen_port = $port$" "$dir/pgbouncer.ini" \
        || { echo "deploy/pgbouncer.ini changed: update tests/deploy/pgbouncer.sh" >&2; exit 1; }
    # The suite makes a database per test worker and per served test, each a pool of its own:
    # all of them together stay under the server's max_connections, beside the tests that
    # connect to PostgreSQL itself; a pool of a dropped database is let go of soon.
    cat >> "$dir/pgbouncer.ini" <<CONF
max_user_connections = 100
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
unix_socket_dir =
CONF
    if [ "$(id -u)" = 0 ]; then chown -R postgres "$dir"; fi
    as_owner pgbouncer -d "$dir/pgbouncer.ini"
    for _ in $(seq 1 50); do
        if pg_isready -q -h 127.0.0.1 -p "$port"; then
            sed -E "s|@[^/@]+/|@127.0.0.1:$port/|" <<<"$url"
            exit 0
        fi
        sleep 0.1
    done
    echo "PgBouncer did not start: $(tail -5 "$dir/pgbouncer.log")" >&2
    exit 1
    ;;
stop)
    if [ -f "$dir/pgbouncer.pid" ]; then
        kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
    fi
    ;;
*)
    echo "usage: $0 start DIR PORT URL | stop DIR" >&2
    exit 2
    ;;
esac
