#!/usr/bin/env bash
# Times README's demo command (./scripts/demo.sh) as on a fresh Debian 12 machine:
# in a chroot made by debootstrap (minbase bookworm, nothing but what debootstrap
# installs), from a clone of this repository's HEAD, with no ccache and no packages
# but the base system, so the run pays apt (index, download, install), configure,
# the cold compile and the demo. Needs root, debootstrap and a Debian mirror.
# Prints the total and its parts. See docs/packaging.md#the-fresh-machine-figure.
#
#   sudo bench/demo_fresh.sh [--base DIR] [--keep]
#
# --base DIR: where the pristine chroot is kept between runs (default
# /var/tmp/keel-demo-fresh; made once, ~8 minutes). Each run copies it, so every
# run starts fresh. --keep keeps the run's chroot.
set -euo pipefail
cd "$(dirname "$0")/.."
base=/var/tmp/keel-demo-fresh keep=0
while (($#)); do
  case $1 in
    --base) base=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    *) echo "demo_fresh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "demo_fresh: needs root (chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "demo_fresh: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }

if [ ! -e "$base/.complete" ]; then
  rm -rf "$base"
  debootstrap --variant=minbase bookworm "$base/root" http://deb.debian.org/debian >&2
  touch "$base/.complete"
fi

run=$(mktemp -d /var/tmp/keel-demo-run.XXXXXX)
unmount() { for m in dev/pts dev sys proc; do umount -l "$run/root/$m" 2>/dev/null || true; done; }
cleanup() { unmount; ((keep)) || rm -rf "$run"; }
trap cleanup EXIT
cp -a "$base/root" "$run/root"
git clone -q . "$run/root/root/keel"
cp /etc/resolv.conf "$run/root/etc/resolv.conf"
mount -t proc proc "$run/root/proc"; mount -t sysfs sys "$run/root/sys"
mount --bind /dev "$run/root/dev"; mount --bind /dev/pts "$run/root/dev/pts"

echo "demo_fresh: $(git log -1 --format='%h %s'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
# bash's own `time`: minbase has no /usr/bin/time.
chroot "$run/root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c \
  'TIMEFORMAT="%R %U %S"; cd /root/keel && { time ./scripts/demo.sh > /root/demo.log 2>&1; } 2> /root/time.txt' ||
  { tail -20 "$run/root/root/demo.log"; echo "demo_fresh: the demo failed" >&2; exit 1; }
end=$(date +%s.%N)
read -r wall user sys < "$run/root/root/time.txt"

# The parts, from apt's own log and the build directory's files.
stamp() { date -d "$1" +%s; }
apt_start=$(stamp "$(grep -m1 Start-Date "$run/root/var/log/apt/history.log" | cut -d' ' -f2-)")
apt_end=$(stamp "$(grep End-Date "$run/root/var/log/apt/history.log" | tail -1 | cut -d' ' -f2-)")
configured=$(stat -c %Y "$run/root/root/keel/build-demo/build.ninja")
built=$(stat -c %Y "$run/root/root/keel/build-demo/cli/keel")
fetched=$(grep -m1 '^Fetched' "$run/root/root/demo.log" || true)
printf 'demo_fresh: total %.0f s wall, %.0f CPU-s (user %s, sys %s), load after %s\n' \
  "$wall" "$(echo "$user + $sys" | bc)" "$user" "$sys" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  before apt (index update)       %4.0f s\n' "$(echo "$apt_start - $start" | bc)"
printf '  apt install                     %4d s   (%s)\n' $((apt_end - apt_start)) "${fetched:-nothing fetched}"
printf '  configure                       %4d s\n' $((configured - apt_end))
printf '  compile keel                    %4d s\n' $((built - configured))
printf '  the demo (backup, restore, diff, check) %.0f s\n' "$(echo "$end - $built" | bc)"
grep '^demo:' "$run/root/root/demo.log"
