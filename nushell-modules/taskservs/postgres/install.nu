# Installs PostgreSQL 15 on the server: creates the cluster `15 main` (initdb) when it does
# not exist, makes it listen on all addresses (password logins from the server's own
# networks), starts it, and waits (bounded) until pg_isready accepts connections.
# Returns pg_isready's answer.
export def main [exec: closure, ctx: record] {
    do $exec r#'
        set -e
        command -v pg_ctlcluster >/dev/null || { echo "postgresql-15 is not installed in the image" >&2; exit 1; }
        if ! pg_lsclusters -h | grep -q '^15 *main '; then
            pg_createcluster 15 main >/dev/null
        fi
        pg_conftool 15 main set listen_addresses '*'
        hba=/etc/postgresql/15/main/pg_hba.conf
        grep -q '^host all all samenet scram-sha-256' "$hba" || echo 'host all all samenet scram-sha-256' >>"$hba"
        pg_lsclusters -h | grep -q '^15 *main .* online ' || pg_ctlcluster 15 main start
        for i in $(seq 60); do
            pg_isready -q && exit 0
            sleep 0.5
        done
        echo "postgres does not accept connections after 30 s; its log:" >&2
        tail -n 20 /var/log/postgresql/postgresql-15-main.log >&2
        exit 1
    '#
    do $exec "pg_isready" | str trim
}
