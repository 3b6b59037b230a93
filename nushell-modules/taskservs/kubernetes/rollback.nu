# Rolls Kubernetes back: `kubeadm reset` (which also removes its stacked etcd's data in
# /var/lib/etcd), stops the kubelet loop, and removes the configuration. Packages
# installed from pkgs.k8s.io stay (removing them would need the network again).
export def main [exec: closure, ctx: record] {
    do $exec r#'
        if command -v kubeadm >/dev/null && [ -d /etc/kubernetes ]; then
            kubeadm reset -f --cri-socket unix:///run/containerd/containerd.sock >/dev/null 2>&1 || true
        fi
        if [ -f /run/kubelet-supervise.pid ]; then
            kill "$(cat /run/kubelet-supervise.pid)" 2>/dev/null || true
            rm -f /run/kubelet-supervise.pid
        fi
        pkill -x kubelet || true
        rm -rf /etc/kubernetes /var/lib/kubelet /root/.kube /usr/local/sbin/kubelet-supervise
    '# | ignore
}
