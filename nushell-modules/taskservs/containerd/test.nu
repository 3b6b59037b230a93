# Tests containerd for real through its API: creates a namespace, lists it, removes it.
# Returns the namespace's name.
export def main [exec: closure, ctx: record] {
    let ns = $"provisioning-test-(random chars --length 6 | str downcase)"
    do $exec $"ctr namespaces create ($ns)" | ignore
    let listed = (do $exec "ctr namespaces list --quiet" | lines)
    do $exec $"ctr namespaces remove ($ns)" | ignore
    if $ns not-in $listed {
        error make {msg: $"containerd test: namespace ($ns) was created but is not listed: ($listed | str join ', ')"}
    }
    $ns
}
