# Checks that the Kubernetes API server is ready (`kubectl get --raw /readyz` = ok).
export def main [exec: closure, ctx: record] {
    do $exec r#'
        command -v kubectl >/dev/null || { echo "kubernetes is not installed: kubectl is missing" >&2; exit 1; }
        export KUBECONFIG=/etc/kubernetes/admin.conf
        answer=$(kubectl get --raw /readyz)
        [ "$answer" = ok ] || { echo "readyz answered: $answer" >&2; exit 1; }
        echo "$answer"
    '# | str trim
}
