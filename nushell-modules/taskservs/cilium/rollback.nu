# Rolls Cilium back: `cilium uninstall` while the cluster answers, then removes the CLI
# when install downloaded it (a CLI that came with the image stays).
export def main [exec: closure, ctx: record] {
    do $exec r#'
        export KUBECONFIG=/etc/kubernetes/admin.conf
        if command -v cilium >/dev/null && kubectl get --raw /readyz >/dev/null 2>&1; then
            cilium uninstall --wait >/dev/null 2>&1 || true
        fi
        if [ -f /usr/local/bin/.cilium-downloaded-by-provisioning ]; then
            rm -f /usr/local/bin/cilium /usr/local/bin/.cilium-downloaded-by-provisioning
        fi
    '# | ignore
}
