#!/bin/bash
# Build (or reuse) a tiny Linux guest for podtap end-to-end VM tests.
#
#   tests/guest/build-guest.sh [CACHE_DIR]
#
# CACHE_DIR defaults to ${PODTAP_GUEST_CACHE:-/var/cache/podtap-test-guest}.
# Output: $CACHE_DIR/vmlinuz and $CACHE_DIR/initramfs.gz; the last two lines
# printed on stdout are "KERNEL=<path>" and "INITRD=<path>".
#
# The kernel is Debian's linux-image-cloud-amd64 (its versioned dependency),
# fetched with apt-get download + dpkg -x: nothing is installed on the host
# except, if missing, qemu-system-x86, busybox-static, cpio and iproute2.
# dhcpcd (Debian's dhcpcd-base) is fetched the same way, for DHCP guests.
# See README.md in this directory.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
INIT_SRC="$HERE/init"
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"
CACHE_DIR=${1:-${PODTAP_GUEST_CACHE:-/var/cache/podtap-test-guest}}
KERNEL="$CACHE_DIR/vmlinuz"
INITRD="$CACHE_DIR/initramfs.gz"
# "<sha256 of init + this script> <sha256 of initramfs.gz>": what the
# initramfs was built from, and that it is still the one built from it.
STAMP="$CACHE_DIR/inputs.sha256"

# Load order matters: each module depends on the ones before it.
MODULES=(virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev
         virtio_pci failover net_failover virtio_net)

log() { echo "build-guest: $*" >&2; }
die() { log "error: $*"; exit 1; }

print_result() {
    echo "KERNEL=$KERNEL"
    echo "INITRD=$INITRD"
}

sha() { sha256sum | cut -d' ' -f1; }
inputs_hash() { cat "$1" "$SELF" | sha; }

# Fresh when built from exactly these inputs, by content rather than mtime:
# several checkouts may share one cache, each with its own init (and an older
# build-guest.sh may have replaced the initramfs without writing the stamp).
is_fresh() {
    [[ -s "$KERNEL" && -s "$INITRD" && -s "$STAMP" ]] || return 1
    [[ "$(cat "$STAMP")" == "$(inputs_hash "$INIT_SRC") $(sha <"$INITRD")" ]]
}

[[ -f "$INIT_SRC" ]] || die "missing $INIT_SRC"

# Warm cache: nothing to do (no lock, no apt, no root needed).
if is_fresh; then
    print_result
    exit 0
fi

mkdir -p "$CACHE_DIR"
# Serialise concurrent builders sharing one cache.
exec 9>"$CACHE_DIR/.lock"
flock 9
if is_fresh; then
    print_result
    exit 0
fi

# --- host tools -------------------------------------------------------------
declare -A NEED_PKG=(
    [/usr/bin/qemu-system-x86_64]=qemu-system-x86
    [/bin/busybox]=busybox-static
    [/usr/bin/cpio]=cpio
)
missing=()
for f in "${!NEED_PKG[@]}"; do
    [[ -x "$f" ]] || missing+=("${NEED_PKG[$f]}")
done
# /bin/busybox may come from the dynamic "busybox" package; we need the static one.
if [[ -x /bin/busybox ]] && ! dpkg -s busybox-static >/dev/null 2>&1; then
    missing+=(busybox-static)
fi
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if ((${#missing[@]})); then
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/podtap-guest.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# --- kernel + modules (cached separately from the initramfs) ---------------
KDIR="$CACHE_DIR/kernel"
if [[ ! -s "$KDIR/vmlinuz" || ! -s "$KDIR/modules.order" ]]; then
    resolve_kpkg() {
        apt-cache depends linux-image-cloud-amd64 2>/dev/null |
            awk '$1 ~ /Depends:$/ && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
    }
    kpkg=$(resolve_kpkg || true)
    if [[ -z "$kpkg" ]]; then
        log "linux-image-cloud-amd64 not resolvable; running apt-get update"
        apt-get update -qq
        kpkg=$(resolve_kpkg || true)
    fi
    [[ -n "$kpkg" ]] || die "cannot resolve the versioned dependency of linux-image-cloud-amd64"
    log "kernel package: $kpkg"

    mkdir "$TMP/deb" "$TMP/x"
    (cd "$TMP/deb" && apt-get download -qq -o APT::Sandbox::User=root "$kpkg" >&2)
    deb=$(ls "$TMP"/deb/*.deb)
    dpkg -x "$deb" "$TMP/x"

    vmlinuz=$(ls "$TMP"/x/boot/vmlinuz-* 2>/dev/null | head -n1)
    [[ -n "$vmlinuz" ]] || die "no /boot/vmlinuz-* in $deb"
    kver=${vmlinuz##*/vmlinuz-}
    moddir="$TMP/x/lib/modules/$kver"
    [[ -d "$moddir" ]] || die "no lib/modules/$kver in $deb"

    rm -rf "$KDIR.new"
    mkdir -p "$KDIR.new/modules"
    cp "$vmlinuz" "$KDIR.new/vmlinuz"
    : >"$KDIR.new/modules.order"
    for m in "${MODULES[@]}"; do
        f=$(find "$moddir" -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" \
                -o -name "$m.ko.gz" | head -n1)
        if [[ -z "$f" ]]; then
            if grep -q "/$m\.ko" "$moddir/modules.builtin" 2>/dev/null; then
                log "module $m is built in; skipping"
                continue
            fi
            die "module $m not found in $kpkg"
        fi
        out="$KDIR.new/modules/$m.ko"
        case "$f" in
            *.ko)     cp "$f" "$out" ;;
            *.ko.xz)  xz -dc "$f" >"$out" ;;
            *.ko.zst) command -v zstd >/dev/null || die "need zstd to unpack $f"
                      zstd -qdc "$f" >"$out" ;;
            *.ko.gz)  gzip -dc "$f" >"$out" ;;
        esac
        echo "$m" >>"$KDIR.new/modules.order"
    done
    echo "$kpkg" >"$KDIR.new/package"
    echo "$kver" >"$KDIR.new/version"
    rm -rf "$KDIR"
    mv "$KDIR.new" "$KDIR"
fi
log "kernel $(cat "$KDIR/version") from $(cat "$KDIR/package")"

# --- dhcpcd (cached like the kernel) -----------------------------------------
# Debian's dhcpcd-base, unpacked with dpkg -x (the host's dhcpcd, if any, is
# not used): the binary, its hook runner and the resolv.conf hook. The other
# hooks (hostname, NTP) and the udev plugin are left out.
DDIR="$CACHE_DIR/dhcpcd"
if [[ ! -x "$DDIR/root/usr/sbin/dhcpcd" || ! -s "$DDIR/package" ]]; then
    fetch_dhcpcd() {
        rm -rf "$TMP/ddeb" && mkdir "$TMP/ddeb" &&
            (cd "$TMP/ddeb" && apt-get download -qq -o APT::Sandbox::User=root dhcpcd-base >&2)
    }
    if ! fetch_dhcpcd; then
        log "dhcpcd-base not downloadable; running apt-get update"
        apt-get update -qq
        fetch_dhcpcd || die "cannot download dhcpcd-base"
    fi
    deb=$(ls "$TMP"/ddeb/*.deb)
    mkdir "$TMP/dx"
    dpkg -x "$deb" "$TMP/dx"
    rm -rf "$DDIR.new"
    mkdir -p "$DDIR.new/root/usr/sbin" "$DDIR.new/root/usr/lib/dhcpcd/dhcpcd-hooks"
    for f in usr/sbin/dhcpcd usr/lib/dhcpcd/dhcpcd-run-hooks \
             usr/lib/dhcpcd/dhcpcd-hooks/20-resolv.conf; do
        [[ -f "$TMP/dx/$f" ]] || die "no /$f in $deb"
        cp -p "$TMP/dx/$f" "$DDIR.new/root/$f"
    done
    dpkg-deb -f "$deb" Package Version | awk '{ printf "%s%s", sep, $2; sep = " " } END { print "" }' \
        >"$DDIR.new/package"
    rm -rf "$DDIR"
    mv "$DDIR.new" "$DDIR"
fi
log "dhcpcd from $(cat "$DDIR/package")"

# --- initramfs ---------------------------------------------------------------
R="$TMP/root"
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,etc,lib/modules/podtap,usr/lib/podtap}
cp /bin/busybox "$R/bin/busybox"
if chroot "$R" /bin/busybox --install -s 2>/dev/null; then
    :
else
    # Not root (no chroot): same links busybox --install -s would create.
    /bin/busybox --list-full | while read -r p; do
        [[ -e "$R/$p" ]] || ln -s /bin/busybox "$R/$p"
    done
fi

cp "$KDIR"/modules/*.ko "$R/lib/modules/podtap/"
cp "$KDIR/modules.order" "$R/lib/modules/podtap/order"

# copy_libs BINARY: the shared libraries BINARY needs (ldd, on this host),
# at the same paths in the initramfs.
copy_libs() {
    ldd "$1" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' |
        while read -r lib; do
            [[ -e "$R$lib" ]] && continue
            mkdir -p "$R$(dirname "$lib")"
            cp -L "$lib" "$R$lib"
        done
}

# busybox ip has no "neigh replace" and no route metrics in its listings, so
# the guest also gets the host's iproute2 ip (plus its shared libraries).
full_ip=$(readlink -f "$(command -v ip)")
cp "$full_ip" "$R/usr/lib/podtap/ip"
copy_libs "$full_ip"

# dhcpcd: binary, hooks, its state dir, and its privilege-separation user
# (chrooted into /usr/lib/dhcpcd, as on Debian). Its libraries (libc only on
# bookworm) come from this host, like ip's.
cp -a "$DDIR/root/." "$R/"
copy_libs "$R/usr/sbin/dhcpcd"
mkdir -p "$R/var/lib/dhcpcd" "$R/run/dhcpcd"

install -m 0755 "$INIT_SRC" "$R/init"
built_from=$(inputs_hash "$R/init")
printf 'root:x:0:0:root:/:/bin/sh\ndhcpcd:x:104:65534:DHCP Client Daemon:/usr/lib/dhcpcd:/bin/false\n' \
    >"$R/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"

(cd "$R" && find . -print0 | LC_ALL=C sort -z |
    cpio --null -o -H newc --quiet -R 0:0) | gzip -9n >"$TMP/initramfs.gz"

# Copy next to the targets first so the final renames are atomic.
cp "$KDIR/vmlinuz" "$KERNEL.tmp"
cp "$TMP/initramfs.gz" "$INITRD.tmp"
mv -f "$KERNEL.tmp" "$KERNEL"
mv -f "$INITRD.tmp" "$INITRD"
touch "$KERNEL" "$INITRD"
echo "$built_from $(sha <"$TMP/initramfs.gz")" >"$STAMP.tmp"
mv -f "$STAMP.tmp" "$STAMP"
log "initramfs $(du -h "$INITRD" | cut -f1), kernel $(du -h "$KERNEL" | cut -f1)"
print_result
