# Tests Kubernetes for real: every node is listed, and a namespace can be created, read
# and deleted through the API server. Returns the nodes' names.
export def main [exec: closure, ctx: record] {
    let ns = $"provisioning-test-(random chars --length 6 | str downcase)"
    do $exec $"export KUBECONFIG=/etc/kubernetes/admin.conf
        kubectl create namespace ($ns) >/dev/null
        kubectl get namespace ($ns) -o name >/dev/null
        kubectl delete namespace ($ns) --wait=false >/dev/null" | ignore
    do $exec "KUBECONFIG=/etc/kubernetes/admin.conf kubectl get nodes -o name" | lines
}
