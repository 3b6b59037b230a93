# Rolls PostgreSQL back: stops the cluster `15 main` and drops it with its data and
# configuration (a later install creates it anew).
export def main [exec: closure, ctx: record] {
    do $exec r#'
        if pg_lsclusters -h 2>/dev/null | grep -q '^15 *main '; then
            pg_dropcluster --stop 15 main
        fi
        rm -rf /var/lib/postgresql/15/main
    '# | ignore
}
