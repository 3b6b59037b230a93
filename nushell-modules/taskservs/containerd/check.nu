# Checks that containerd answers (`ctr version` shows a server); returns the answer.
export def main [exec: closure, ctx: record] {
    let out = (do $exec "ctr version")
    if not ($out | str contains "Server:") {
        error make {msg: $"containerd: `ctr version` shows no server:\n($out)"}
    }
    $out | str trim
}
