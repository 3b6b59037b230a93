# Tests redis for real: sets a key, reads it back, deletes it. Returns the value read.
export def main [exec: closure, ctx: record] {
    let key = $"provisioning:test:(random chars --length 8)"
    let value = (random uuid)
    do $exec $"redis-cli set ($key) ($value)" | ignore
    let got = (do $exec $"redis-cli get ($key)" | str trim)
    do $exec $"redis-cli del ($key)" | ignore
    if $got != $value {
        error make {msg: $"redis test: wrote `($value)` to ($key) but read `($got)`"}
    }
    $got
}
