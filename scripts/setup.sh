#!/usr/bin/env bash
# Installs the Debian packages keel needs. Idempotent: does nothing when all
# are present. Run as root or with sudo.
#   scripts/setup.sh build   building and running keel (what scripts/demo.sh needs)
#   scripts/setup.sh test    also the tests, benchmarks, fuzzers and the package test (the default)
set -euo pipefail

mode=${1:-test}
BUILD=(
  g++ cmake ninja-build pkg-config
  libzstd-dev libxxhash-dev libisal-dev libssl-dev libsqlite3-dev libicu-dev libexpat1-dev
  libboost-dev libboost-program-options-dev
  libfuse3-dev fuse3  # keel mount
  # the RDMA data plane is always built (rdma-core's libraries)
  libibverbs-dev librdmacm-dev
)
TEST=(
  catch2 libbenchmark-dev python3 attr time
  restic borgbackup
  # a real S3 server for the S3 tests: Ceph's RADOS Gateway (tests/s3/rgw.sh)
  radosgw ceph-mon ceph-osd ceph-common awscli openssl
  # S3 clients that drive keel gateway in its tests (tests/gateway)
  s3cmd rclone python3-boto3
  # fuzz targets (cmake -DKEEL_FUZZ=ON): clang with libFuzzer
  clang libclang-rt-14-dev
  # RDMA providers and the Soft-RoCE VM harness (tests/rdma/run-in-vm.sh)
  rdma-core ibverbs-providers
  qemu-system-x86 busybox-static kmod cpio iproute2
  # the Debian package test (tests/package): dpkg-shlibdeps, adduser, man rendering
  dpkg-dev adduser man-db groff-base
)
case $mode in
  build) PACKAGES=("${BUILD[@]}") ;;
  test) PACKAGES=("${BUILD[@]}" "${TEST[@]}") ;;
  *) echo "usage: scripts/setup.sh build|test" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "[setup] installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
install() { $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >&2; }
install || { $SUDO apt-get update -q >&2 && install; }
