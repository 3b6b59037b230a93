# containerd runs from the image; kubernetes and cilium fail honestly without network.
let node = (server k8s-01)
local create-server $node (ctx-for $node) | ignore
let containerd = {
    install: (step install containerd $node)
    check: (step check containerd $node)
    test: (step test containerd $node)
}
expect-contains "ctr version" $containerd.check "Server:"
let kubernetes = (error-of "kubernetes install" { step install kubernetes $node })
expect-contains "kubernetes without network" $kubernetes "needs network:"
let cilium = (error-of "cilium install" { step install cilium $node })
expect-contains "cilium without network" $cilium "needs network:"
# Their rollbacks are harmless when nothing was installed.
step rollback cilium $node
step rollback kubernetes $node
step rollback containerd $node
expect "containerd after rollback" (local server-exec $node "pgrep -x containerd | wc -l" | str trim) "0"
# A server whose image does not exist: a clear error, nothing created.
let missing = (error-of "missing image" {
    local create-server ((server nope-01) | insert image "localhost/no-such-image:1") (ctx-for $node)
})
expect-contains "missing image" $missing "scripts/build-base-image.sh"
# The engine is the client's DOCKER_HOST, tcp:// too: one that does not answer is named.
let tcp = (error-of "tcp DOCKER_HOST" { with-env {DOCKER_HOST: "tcp://127.0.0.1:9"} { local server-status $node } })
expect-contains "tcp DOCKER_HOST" $tcp "127.0.0.1:9"
local delete-server $node (ctx-for $node)
expect "listed after delete" (local list-servers $INFRA) []
{containerd: $containerd, kubernetes_error: $kubernetes, cilium_error: $cilium, missing_image_error: $missing, tcp_error: $tcp} | to json -r
