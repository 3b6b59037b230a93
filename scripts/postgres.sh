#!/usr/bin/env bash
# A throwaway PostgreSQL 15 server for the PostgreSQL store's tests.
#
#   scripts/postgres.sh start DIR   initdb + start in DIR (created, owned by `postgres`);
#                                   prints the server URL on stdout. Run again on a DIR
#                                   whose server is up, it only prints the URL.
#   scripts/postgres.sh stop DIR    fast shutdown, then removes DIR.
#
# Use:  export PROVISIONING_TEST_DATABASE_URL=$(scripts/postgres.sh start /tmp/orch-pg)
#       cargo test -p provisioning-orchestrator --lib store::postgres
#
# The server trusts local connections (--auth=trust) and listens on 127.0.0.1 only, on a
# free port, with its socket in DIR. initdb refuses root, so as root the server runs as the
# `postgres` user. PostgreSQL 15 is installed (Debian's postgresql-15) when missing.
set -euo pipefail

BIN=/usr/lib/postgresql/15/bin

usage() {
    echo "usage: $0 start DIR | stop DIR" >&2
    exit 2
}

# Runs a server binary as the `postgres` user when we are root, else as ourselves.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

ensure_installed() {
    if [ -x "$BIN/initdb" ]; then
        return
    fi
    echo "PostgreSQL 15 is missing: installing postgresql-15" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y postgresql-15 >&2
}

# A TCP port nothing on 127.0.0.1 listens on (bash only: a fresh machine may lack python).
free_port() {
    local port
    for _ in $(seq 1 100); do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
    echo "no free port found" >&2
    exit 1
}

url_of() {
    echo "postgres://postgres@127.0.0.1:$(cat "$1/port")/postgres"
}

start() {
    local dir=$1
    ensure_installed
    if [ -f "$dir/port" ] && as_owner "$BIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        url_of "$dir"
        return
    fi
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres: "$dir"
    fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_owner "$BIN/initdb" -D "$dir/data" --auth=trust --username=postgres \
            --encoding=UTF8 --no-instructions >"$dir/initdb.log" 2>&1 || {
            cat "$dir/initdb.log" >&2
            exit 1
        }
    fi
    local port
    port=$(free_port)
    as_owner "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-h 127.0.0.1 -p $port -k $dir" start >&2 || {
        cat "$dir/server.log" >&2
        exit 1
    }
    echo "$port" >"$dir/port"
    url_of "$dir"
}

stop() {
    local dir=$1
    # Only a directory `start` made is removed (a mistyped `stop ~` removes nothing).
    if [ ! -f "$dir/data/PG_VERSION" ] && [ ! -f "$dir/initdb.log" ]; then
        if [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
            echo "$dir is not a server directory of $0 start: left as it is" >&2
            exit 1
        fi
        rm -rf "$dir"
        return
    fi
    if [ -f "$dir/data/PG_VERSION" ] && [ -x "$BIN/pg_ctl" ]; then
        as_owner "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    fi
    rm -rf "$dir"
}

[ $# -eq 2 ] || usage
case $1 in
start) start "$2" ;;
stop) stop "$2" ;;
*) usage ;;
esac
