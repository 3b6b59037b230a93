# Checks that redis answers `redis-cli ping` with PONG; returns the answer.
export def main [exec: closure, ctx: record] {
    let answer = (do $exec "redis-cli ping" | str trim)
    if $answer != "PONG" {
        error make {msg: $"redis on ($ctx.server?.hostname? | default '?') answered `($answer)` to ping instead of PONG"}
    }
    $answer
}
