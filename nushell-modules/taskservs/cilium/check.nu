# Checks that Cilium is healthy (`cilium status`, waiting up to 60 s); returns the status.
export def main [exec: closure, ctx: record] {
    do $exec r#'
        command -v cilium >/dev/null || { echo "cilium is not installed: the cilium CLI is missing" >&2; exit 1; }
        KUBECONFIG=/etc/kubernetes/admin.conf cilium status --wait --wait-duration 60s
    '# | str trim
}
