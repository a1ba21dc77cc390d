#!/usr/bin/env bash
# Builds keel's Debian package (cpack), installs it with dpkg into this
# system, runs the installed keel (version, a backup and restore of
# examples/data, man keel-backup), then purges it and checks that nothing is
# left: no file of the package, no /etc/keel, no keel user.
#   tests/package/test_package.sh BUILD_DIR
# Exit 77 (skipped) without root, or where keel is already installed or a
# keel user exists: the test must not touch an installation it did not make.
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$(dirname "$0")/../..")
log() { echo "[package] $*" >&2; }
skip() { log "skipped: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "needs root to install a package"
command -v dpkg-shlibdeps >/dev/null || skip "dpkg-dev is missing (scripts/setup.sh test)"
dpkg-query -W -f='${db:Status-Status}' keel 2>/dev/null | grep -qx installed && skip "a keel package is installed already"
getent passwd keel >/dev/null && skip "a user keel exists already"

work=$(mktemp -d)
installed=0
cleanup() {
  local rc=$?
  if [ $installed -eq 1 ]; then dpkg -P keel >/dev/null 2>&1 || log "cleanup: dpkg -P keel failed"; fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT

log "building the package"
(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log" >&2; exit 1; }
version=$("$build/cli/keel" --version | awk '{print $2}')
deb="$work/out/keel_${version}_amd64.deb"
[ -f "$deb" ] || { log "no $deb"; ls "$work/out" >&2; exit 1; }

log "checking its contents"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' | grep -v '/$' >"$work/files"
for f in /usr/bin/keel /usr/share/man/man1/keel.1.gz /usr/share/man/man1/keel-backup.1.gz \
         /usr/share/man/man1/keel-diff.1.gz /usr/share/bash-completion/completions/keel \
         /usr/share/zsh/vendor-completions/_keel /lib/systemd/system/keel-scheduler.service \
         /lib/systemd/system/keel-gateway.service /lib/systemd/system/keel-job@.service \
         /lib/systemd/system/keel-job@.timer /etc/keel/gateway.conf; do
  grep -qx "$f" "$work/files" || { log "the package lacks $f"; exit 1; }
done
dpkg-deb -f "$deb" Depends | grep -q libzstd || { log "Depends lacks the shared libraries: $(dpkg-deb -f "$deb" Depends)"; exit 1; }
dpkg-deb -e "$deb" "$work/control"
grep -qx /etc/keel/gateway.conf "$work/control/conffiles" || { log "gateway.conf is no conffile"; exit 1; }

log "installing it"
installed=1
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; exit 1; }
/usr/bin/keel --version | grep -qx "keel $version"
getent passwd keel >/dev/null || { log "no keel user after install"; exit 1; }
[ "$(stat -c %U /var/lib/keel-gateway)" = keel ] || { log "/var/lib/keel-gateway is not keel's"; exit 1; }
grep -q "ExecStart=/usr/bin/keel scheduler" /lib/systemd/system/keel-scheduler.service
bash -n /usr/share/bash-completion/completions/keel

log "the demo's backup and restore with the installed keel"
export KEEL_REPO=$work/repo KEEL_PASSWORD=package-test XDG_DATA_HOME=$work/state
/usr/bin/keel init >/dev/null
/usr/bin/keel backup "$src/examples/data" --tag demo >/dev/null
/usr/bin/keel restore latest --target "$work/restore" >/dev/null
diff -r "$src/examples/data" "$work/restore$src/examples/data"
/usr/bin/keel check --read-data >/dev/null

log "man keel-backup"
MANWIDTH=100 man -P cat keel-backup 2>"$work/man.err" >"$work/man.txt" || { cat "$work/man.err" >&2; exit 1; }
grep -q -- "--exclude" "$work/man.txt" && grep -q "GLOBAL OPTIONS" "$work/man.txt" || { cat "$work/man.txt" >&2; exit 1; }
[ ! -s "$work/man.err" ] || { log "man warned:"; cat "$work/man.err" >&2; exit 1; }

log "purging it"
dpkg -P keel >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; exit 1; }
installed=0
left=0
while read -r f; do
  if [ -e "$f" ]; then log "left behind: $f"; left=1; fi
done <"$work/files"
for f in /etc/keel /var/lib/keel /var/lib/keel-gateway; do
  if [ -e "$f" ]; then log "left behind: $f"; left=1; fi
done
if getent passwd keel >/dev/null || getent group keel >/dev/null; then log "left behind: the keel user or group"; left=1; fi
dpkg-query -W keel >/dev/null 2>&1 && { log "dpkg still knows keel"; left=1; }
[ $left -eq 0 ]
log "ok: built, installed, ran and purged $deb"
