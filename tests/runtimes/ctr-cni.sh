#!/bin/bash
# Run one container with `ctr run --cni` against a private containerd, inside the
# node netns NODE and a private mount namespace; the image is a busybox OCI
# tarball built here and imported (no registry). The container prints its links.
# usage: ctr-cni.sh WORK NODE PODTAP SUBNET
set -euo pipefail
W=$1; NODE=$2; PODTAP=$3; SUBNET=$4
# cri_rootfs: the busybox rootfs with `links`, and the CNI bin dir (as cri.sh's)
. "$(dirname "${BASH_SOURCE[0]}")"/cri-env.sh
cri_rootfs "$W" "$PODTAP"
cat > "$W"/net.d/10-podtap.conflist <<J
{"cniVersion":"1.0.0","name":"ptctr","plugins":[
 {"type":"bridge","bridge":"ptctrbr0","isGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","dataDir":"$W/ipam","ranges":[[{"subnet":"$SUBNET"}]]}},
 {"type":"podtap","mode":"tc","queues":1,"stateDir":"$W/state"}]}
J
# OCI image layout: one layer (the rootfs), a config, a manifest, an index.
# The manifest's ref.name annotation names the image, as in cri.sh. (An
# --index-name of the same name made a second image record under that name;
# once, in CI, `ctr run` then found the layer's content and snapshot gone.)
blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); mv "$1" "$W/img/blobs/sha256/$d"; echo "$d"; }
tar -C "$W"/rootfs -cf "$W"/layer.tar .
LS=$(stat -c %s "$W"/layer.tar); LD=$(blob "$W"/layer.tar)
printf '{"architecture":"amd64","os":"linux","config":{"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$LD" >"$W"/cfg
CS=$(stat -c %s "$W"/cfg); CD=$(blob "$W"/cfg)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$CD" "$CS" "$LD" "$LS" >"$W"/man
MS=$(stat -c %s "$W"/man); MD=$(blob "$W"/man)
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"localhost/podtap-busybox:test"}}]}' "$MD" "$MS" >"$W"/img/index.json
echo '{"imageLayoutVersion":"1.0.0"}' >"$W"/img/oci-layout
tar -C "$W"/img -cf "$W"/image.tar oci-layout index.json blobs
cat > "$W"/config.toml <<J
version = 2
root = "$W/lib"
state = "$W/run"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$W/c.sock"
J
unshare -m --propagation private bash -c "
set -e
mkdir -p /run/netns /etc/cni/net.d /opt/cni/bin
mount -t tmpfs tmpfs /run/netns
mount --bind $W/net.d /etc/cni/net.d
mount --bind $W/bin /opt/cni/bin
exec nsenter --net=/proc/self/fd/9 bash -c '
containerd --config $W/config.toml >$W/containerd.log 2>&1 &
CPID=\$!
trap \"kill \$CPID; wait \$CPID\" EXIT
for i in \$(seq 100); do [ -S $W/c.sock ] && break; sleep 0.1; done
C=\"ctr --address $W/c.sock\"
\$C image import $W/image.tar >/dev/null
\$C run --rm --cni localhost/podtap-busybox:test ptc1 /bin/links
'
" 9<"/run/netns/$NODE"
