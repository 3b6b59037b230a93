# Checks that PostgreSQL accepts connections (pg_isready); returns its answer.
export def main [exec: closure, ctx: record] {
    do $exec "pg_isready" | str trim
}
