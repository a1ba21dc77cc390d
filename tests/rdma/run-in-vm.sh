#!/bin/bash
# tests/rdma/run-in-vm.sh COMMAND [ARGS...]
#
# Runs COMMAND inside a throw-away qemu VM with a Soft-RoCE device (rxe0 on
# dummy0, 169.254.77.1/16), prints its output and exits with its exit code.
# For machines whose kernel has no RDMA: the VM boots Debian's stock kernel
# (which ships rdma_rxe) with THIS machine's root filesystem as its root,
# read-only over 9p, so host-built binaries and the host's rdma-core run
# unchanged; the current directory is shared read-write. Scratch space is a
# tmpfs at /run/tmp (TMPDIR and HOME); the host's /tmp stays visible, read-only,
# so a checkout or build directory under /tmp works as anywhere else.
# The VM has no network card. docs/rdma.md explains the harness.
#
# Exit 77 (skipped) when qemu, busybox or the kernel cannot be had, or when
# already inside the VM; 125 when the guest gave no exit code (boot failure,
# crash, timeout).
# Env: KEEL_RXE_VM_CACHE    kernel cache (default ~/.cache/keel-rxe-vm)
#      KEEL_RXE_VM_KERNEL   kernel package (default: what linux-image-amd64 depends on)
#      KEEL_RXE_VM_TIMEOUT  seconds for the whole VM run (default 600)
#      KEEL_RXE_VM_MEM      MiB (default 2048), KEEL_RXE_VM_SMP (default 2)
#      KEEL_RXE_VM_VERBOSE=1  show the kernel log
# In the guest the command sees RXE_DEV=rxe0 RXE_IP=169.254.77.1
# KEEL_IN_RXE_VM=1 and nothing else from the host environment.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,23p' "$0" >&2; exit 2; }
log() { echo "[keel-rxe-vm] $*" >&2; }
skip() { log "SKIP: $*"; exit 77; }

[ -z "${KEEL_IN_RXE_VM:-}" ] || skip "already inside the RDMA VM"
export PATH=$PATH:/usr/sbin:/sbin     # depmod, modprobe
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${KEEL_RXE_VM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/var/cache}/.cache}/keel-rxe-vm}
SMP=${KEEL_RXE_VM_SMP:-2}; MEM=${KEEL_RXE_VM_MEM:-2048}; TIMEOUT=${KEEL_RXE_VM_TIMEOUT:-600}
IP=169.254.77.1/16
KLOG=quiet; [ -n "${KEEL_RXE_VM_VERBOSE:-}" ] && KLOG=loglevel=7
# KVM only where the CPU really virtualizes (a kvm device alone may be a PVM
# host that cannot boot Debian's kernel); otherwise TCG, slower but sure.
ACCEL=tcg CPU=max
[ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo && ACCEL=kvm CPU=host

# 1. Host tools, from scripts/setup.sh (the guest uses the host's rdma-core too).
have_tools() {
  command -v qemu-system-x86_64 && command -v cpio && command -v depmod && command -v rdma &&
    [ -x /bin/busybox ] && ! ldd /bin/busybox &&   # static: the initramfs has no libc
    compgen -G '/usr/lib/*/libibverbs/librxe-rdmav*.so'  # Soft-RoCE's verbs provider
} >/dev/null 2>&1
if ! have_tools; then
  log "installing the VM's tools through scripts/setup.sh"
  "$ROOT/scripts/setup.sh" >&2 || true
  have_tools || skip "qemu-system-x86, busybox-static, kmod, cpio, iproute2 or ibverbs-providers missing (scripts/setup.sh)"
fi

# 2. Kernel and the modules rxe needs, extracted once into the cache (~12 MB).
KPKG=${KEEL_RXE_VM_KERNEL:-}
if [ -z "$KPKG" ]; then
  dep() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}'; }
  KPKG=$(dep); [ -n "$KPKG" ] || { apt-get update -q >&2 || true; KPKG=$(dep); }
  [ -n "$KPKG" ] || skip "apt knows no linux-image-amd64 kernel package"
fi
KDIR=$CACHE/$KPKG
# crc32_generic: rxe's ICRC (without it "rdma link add" fails with ENOENT).
MODS="virtio_pci 9pnet_virtio 9p crc32_generic rdma_rxe ib_uverbs rdma_ucm dummy"
if [ ! -f "$KDIR/modules.order" ]; then
  log "fetching $KPKG into $KDIR"
  mkdir -p "$CACHE"; tmp=$(mktemp -d "$CACHE/.tmp.XXXXXX")
  if ! (cd "$tmp" && apt-get download -q "$KPKG" >&2); then rm -rf "$tmp"; skip "cannot download $KPKG"; fi
  dpkg-deb -x "$tmp"/*.deb "$tmp/x"
  kver=$(ls "$tmp/x/lib/modules"); depmod -b "$tmp/x" "$kver"
  mkdir "$tmp/k"; cp "$tmp/x/boot/vmlinuz-$kver" "$tmp/k/vmlinuz"
  for m in $MODS; do modprobe -d "$tmp/x" -S "$kver" --show-depends "$m"; done |
    awk '$1=="insmod" && !seen[$2]++ {print $2}' | while read -r ko; do
      cp "$ko" "$tmp/k/"; basename "$ko" >> "$tmp/k/modules.order"; done
  rm -rf "$KDIR"; mv "$tmp/k" "$KDIR"; rm -rf "$tmp"
fi

# 3. Per-run initramfs (static busybox, the modules, /init) and job script.
RUN=$(mktemp -d "${TMPDIR:-/tmp}/keel-rxe-vm.XXXXXX"); trap 'rm -rf "$RUN"' EXIT
mkdir -p "$RUN/ir/bin" "$RUN/ir/mod" "$RUN/job"
cp /bin/busybox "$RUN/ir/bin/"; cp "$KDIR"/*.ko "$KDIR/modules.order" "$RUN/ir/mod/"
cat > "$RUN/ir/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev; mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /mod/modules.order); do insmod /mod/$m || echo "keel-rxe-vm: insmod $m failed"; done
R=/newroot; o=trans=virtio,version=9p2000.L,msize=512000; mkdir -p $R
mount -t 9p -o $o,ro,cache=loose hostroot $R || { echo "keel-rxe-vm: cannot mount host root"; poweroff -f; }
mount -t proc proc $R/proc; mount -t sysfs sys $R/sys; mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/shm $R/dev/pts; mount -t tmpfs shm $R/dev/shm; mount -t devpts pts $R/dev/pts
mount -t tmpfs run $R/run; mkdir -p $R/run/keel-rxe-vm $R/run/tmp
mount -t 9p -o $o,cache=none job $R/run/keel-rxe-vm
W=$(cat $R/run/keel-rxe-vm/cwd)
[ "$W" = / ] || mount -t 9p -o $o,cache=mmap work $R$W
stty -F /dev/ttyS1 -onlcr 2>/dev/null
chroot $R /bin/bash /run/keel-rxe-vm/job.sh </dev/null 2>&1 | cat >/dev/ttyS1
sync; poweroff -f
EOF
chmod +x "$RUN/ir/init"
(cd "$RUN/ir" && find . | cpio -o -H newc --quiet | gzip -1) > "$RUN/initrd"
pwd > "$RUN/job/cwd"
# dummy0 at MTU 9000 gives rxe an MTU of 4096; rdma_cm needs an IP on it (not lo).
cat > "$RUN/job/job.sh" <<EOF
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/run/tmp TMPDIR=/run/tmp
export RXE_DEV=rxe0 RXE_IP=${IP%/*} RXE_NETDEV=dummy0 KEEL_IN_RXE_VM=1
ip link set lo up
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy   # the module may make one
ip link set dummy0 mtu 9000 up && ip addr add $IP dev dummy0
rdma link add rxe0 type rxe netdev dummy0 || echo "[keel-rxe-vm] rdma link add failed" >&2
cut -d' ' -f1 /proc/uptime > /run/keel-rxe-vm/ready
cd $(printf %q "$PWD")
$(printf '%q ' "$@")
echo \$? > /run/keel-rxe-vm/rc
EOF

# 4. Boot. ttyS0 (kernel log) -> file, ttyS1 (the command) -> stdout.
log "booting $KPKG (accel=$ACCEL smp=$SMP mem=${MEM}M): $*"
start=$(date +%s%N)
fs="security_model=none,multidevs=remap"
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 -nodefaults -no-reboot -display none \
  -serial file:"$RUN/kernel.log" -serial stdio \
  -accel "$ACCEL" -cpu "$CPU" -smp "$SMP" -m "$MEM" \
  -kernel "$KDIR/vmlinuz" -initrd "$RUN/initrd" -append "console=ttyS0 $KLOG panic=-1" \
  -virtfs local,path=/,mount_tag=hostroot,readonly=on,$fs \
  -virtfs local,path="$RUN/job",mount_tag=job,$fs \
  -virtfs local,path="$PWD",mount_tag=work,$fs || log "qemu exited with status $?"
grep -v 'reboot: Power down' "$RUN/kernel.log" >&2 || true
[ -f "$RUN/job/ready" ] && log "guest ready $(cat "$RUN/job/ready") s after boot"
log "VM wall time $(( ($(date +%s%N) - start) / 1000000 )) ms"
[ -f "$RUN/job/rc" ] || { log "no exit code from the guest (boot failure, crash or timeout)"; exit 125; }
exit "$(cat "$RUN/job/rc")"
