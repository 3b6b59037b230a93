# Tests PostgreSQL for real as the postgres user: `select 1`, then a write and a read in a
# scratch table. Returns the rows read.
export def main [exec: closure, ctx: record] {
    let one = (do $exec r#'cd / && runuser -u postgres -- psql -tAc 'select 1''# | str trim)
    if $one != "1" {
        error make {msg: $"postgres test: `select 1` returned `($one)`"}
    }
    do $exec r#'
        cd / && runuser -u postgres -- psql -v ON_ERROR_STOP=1 -qtA <<'SQL'
        create temporary table provisioning_test (id int, name text);
        insert into provisioning_test values (1, 'one'), (2, 'two');
        select string_agg(name, ',' order by id) from provisioning_test;
SQL
    '# | str trim
}
