# Installs Cilium into the server's Kubernetes cluster with the cilium CLI:
# 1. the CLI: used when the image has it, else downloaded from github.com (needs network);
# 2. `cilium install` pulls Cilium's images from quay.io (needs network) unless
#    containerd already has them;
# 3. waits (bounded, 5 min) for `cilium status --wait`.
# Without the network it needs this fails with "needs network: ...". Returns the status.
export def main [exec: closure, ctx: record] {
    let version = ($ctx.taskserv?.version? | default "1.16.1")
    do $exec ($"VERSION='($version)'\n" + r#'
        set -e
        reachable() { timeout 5 bash -c "exec 3<>/dev/tcp/$1/443" 2>/dev/null; }
        if ! command -v cilium >/dev/null; then
            if ! reachable github.com; then
                echo "needs network: the cilium CLI is not in the image and github.com:443 (its releases) is unreachable from $(hostname)" >&2
                exit 1
            fi
            command -v curl >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl ca-certificates >/dev/null; }
            cli=$(curl -fsSL https://raw.githubusercontent.com/cilium/cilium-cli/main/stable.txt)
            curl -fsSL "https://github.com/cilium/cilium-cli/releases/download/$cli/cilium-linux-amd64.tar.gz" \
                | tar -xz -C /usr/local/bin cilium
            touch /usr/local/bin/.cilium-downloaded-by-provisioning
        fi
        if ! ctr -n k8s.io images ls -q 2>/dev/null | grep -q 'cilium/cilium:' && ! reachable quay.io; then
            echo "needs network: cilium install pulls Cilium's images from quay.io, which is unreachable from $(hostname)" >&2
            exit 1
        fi
        export KUBECONFIG=/etc/kubernetes/admin.conf
        kubectl get --raw /readyz >/dev/null 2>&1 || { echo "cilium needs a ready Kubernetes API server: install the kubernetes taskserv first" >&2; exit 1; }
        cilium status >/dev/null 2>&1 || cilium install --version "$VERSION"
        cilium status --wait --wait-duration 5m >/dev/null
    '#)
    do $exec "KUBECONFIG=/etc/kubernetes/admin.conf cilium status" | str trim
}
