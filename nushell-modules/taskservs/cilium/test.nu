# Tests Cilium for real: its agents are rolled out and every node is Ready (a node only
# becomes Ready once its CNI works). Returns the nodes' names.
export def main [exec: closure, ctx: record] {
    do $exec r#'
        export KUBECONFIG=/etc/kubernetes/admin.conf
        kubectl -n kube-system rollout status daemonset/cilium --timeout=120s >/dev/null
        kubectl wait --for=condition=Ready nodes --all --timeout=120s >/dev/null
        kubectl get nodes -o name
    '# | lines
}
