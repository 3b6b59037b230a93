# Installs Kubernetes on the server with kubeadm, on the containerd the `containerd`
# taskserv started:
# 1. kubeadm, kubelet and kubectl: used when the image has them, else installed from
#    pkgs.k8s.io, which needs network. Without both this fails with "needs network: ...".
# 2. kubelet runs under a small supervising loop (servers have no systemd).
# 3. A control-plane node (no cluster, or its node's role is not `worker`) runs
#    `kubeadm init` unless /etc/kubernetes/admin.conf exists, untaints itself and copies
#    admin.conf to /root/.kube/config (the probe's kubectl uses it). A worker is only
#    prepared: `kubeadm join` needs the control plane's token (a cluster's setup.nu).
# Returns `kubectl get --raw /readyz` (control plane) or "prepared" (worker).
export def main [exec: closure, ctx: record] {
    let version = ($ctx.taskserv?.version? | default "1.31.0")
    let me = (do $exec "hostname" | str trim)
    let role = ($ctx.cluster?.nodes? | default [] | where hostname == $me | get -o 0.role | default "control-plane")
    let minor = ($version | split row "." | first 2 | str join ".")
    let vars = $"VERSION='($version)'\nMINOR='v($minor)'\nROLE='($role)'\n"
    do $exec ($vars + r#'
        set -e
        # 1. The binaries, or the network to get them.
        missing=""
        for b in kubeadm kubelet kubectl; do command -v "$b" >/dev/null || missing="$missing $b"; done
        if [ -n "$missing" ]; then
            if ! timeout 5 bash -c 'exec 3<>/dev/tcp/pkgs.k8s.io/443' 2>/dev/null; then
                echo "needs network: kubernetes needs kubeadm, kubelet and kubectl (missing:$missing), which are not in the image, and pkgs.k8s.io:443 (their package repository) is unreachable from $(hostname)" >&2
                exit 1
            fi
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq
            apt-get install -y -qq curl gpg ca-certificates >/dev/null
            mkdir -p /etc/apt/keyrings
            curl -fsSL "https://pkgs.k8s.io/core:/stable:/$MINOR/deb/Release.key" \
                | gpg --dearmor --yes -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg
            echo "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/core:/stable:/$MINOR/deb/ /" \
                >/etc/apt/sources.list.d/kubernetes.list
            apt-get update -qq
            apt-get install -y -qq kubelet kubeadm kubectl >/dev/null
        fi
        # The control plane's images come from registry.k8s.io unless containerd has them.
        if [ "$ROLE" != worker ] && ! ctr -n k8s.io images ls -q 2>/dev/null | grep -q kube-apiserver \
            && ! timeout 5 bash -c 'exec 3<>/dev/tcp/registry.k8s.io/443' 2>/dev/null; then
            echo "needs network: kubeadm init pulls the control plane's images from registry.k8s.io, which is unreachable from $(hostname)" >&2
            exit 1
        fi
        ctr version >/dev/null 2>&1 || { echo "kubernetes needs containerd running: install the containerd taskserv first" >&2; exit 1; }

        # 2. kubelet, restarted until kubeadm has written its configuration.
        cat >/usr/local/sbin/kubelet-supervise <<'SH'
#!/bin/sh
while true; do
    . /var/lib/kubelet/kubeadm-flags.env 2>/dev/null || true
    kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
        --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml \
        --container-runtime-endpoint=unix:///run/containerd/containerd.sock $KUBELET_KUBEADM_ARGS
    sleep 2
done
SH
        chmod +x /usr/local/sbin/kubelet-supervise
        if ! { [ -f /run/kubelet-supervise.pid ] && kill -0 "$(cat /run/kubelet-supervise.pid)" 2>/dev/null; }; then
            nohup /usr/local/sbin/kubelet-supervise >>/var/log/kubelet.log 2>&1 </dev/null &
            echo $! >/run/kubelet-supervise.pid
        fi
        [ "$ROLE" = worker ] && exit 0

        # 3. The control plane.
        if [ ! -f /etc/kubernetes/admin.conf ]; then
            kubeadm init --kubernetes-version "v$VERSION" --node-name "$(hostname)" \
                --cri-socket unix:///run/containerd/containerd.sock \
                --pod-network-cidr 10.244.0.0/16 --ignore-preflight-errors=Swap,SystemVerification
        fi
        mkdir -p /root/.kube
        cp /etc/kubernetes/admin.conf /root/.kube/config
        kubectl taint nodes --all node-role.kubernetes.io/control-plane- >/dev/null 2>&1 || true
        for i in $(seq 120); do
            [ "$(kubectl get --raw /readyz 2>/dev/null)" = ok ] && exit 0
            sleep 1
        done
        echo "the API server is not ready after 120 s" >&2
        exit 1
    '#)
    if $role == "worker" { "prepared" } else { do $exec "kubectl get --raw /readyz" | str trim }
}
