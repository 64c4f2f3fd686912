#!/usr/bin/env bash
# Builds the CPU container image of pstrain as an OCI archive, without a
# Docker engine and without a registry (docs/DEPLOY.md):
#   1. the .deb of a CPU build (cpack; the build needs -DPSTRAIN_WITH_CUDA=OFF),
#   2. a Debian bookworm root filesystem (debootstrap, minbase),
#   3. the .deb installed into it with apt-get, which brings its Debian
#      dependencies, plus dataset-fashion-mnist for the shipped configs,
#   4. that filesystem as one layer of an OCI image (umoci) whose entrypoint
#      is pstrain-launch on the default experiment, tarred.
# Then --check unpacks the image again and, inside its root filesystem
# (chroot), runs `ldd` on every pstrain binary (nothing may be missing) and
# the entrypoint for a short training run.
#
#   tools/image.sh [--build-dir DIR] [--out FILE] [--check]
# Needs root (debootstrap, chroot) and the packages debootstrap, umoci,
# dpkg-dev (tools/setup.sh does not install them: the test suite does not
# build images). Environment: PSTRAIN_DEBIAN_MIRROR (default
# http://deb.debian.org/debian).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="$ROOT/build-cpu"
OUT="$ROOT/pstrain-cpu.oci.tar"
CHECK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --check) CHECK=1; shift ;;
    *) echo "image.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
MIRROR="${PSTRAIN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
say() { echo "image: $*"; }
fail() { echo "image: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (debootstrap and chroot)"
for tool in debootstrap umoci dpkg-shlibdeps cpack; do
  command -v "$tool" >/dev/null || fail "needs $tool (apt-get install debootstrap umoci dpkg-dev cmake)"
done
[ -f "$BUILD_DIR/CMakeCache.txt" ] || fail "no build in $BUILD_DIR: cmake -S . -B $BUILD_DIR -G Ninja -DPSTRAIN_WITH_CUDA=OFF -DPSTRAIN_BUILD_TESTS=OFF && ninja -C $BUILD_DIR pstrain-ps pstrain-worker pstrain-launch pstrain-compare"
grep -q '^PSTRAIN_CUDA_ENABLED:INTERNAL=ON' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null &&
  fail "$BUILD_DIR is a CUDA build; the CPU image needs -DPSTRAIN_WITH_CUDA=OFF"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pstrain-image.XXXXXX")"
cleanup() {
  for m in proc sys dev; do umount "$WORK/rootfs/$m" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

say "1/4 the .deb (cpack in $BUILD_DIR)"
(cd "$BUILD_DIR" && cpack -G DEB >"$WORK/cpack.log" 2>&1) || { cat "$WORK/cpack.log"; fail "cpack failed"; }
DEB="$(ls -t "$BUILD_DIR"/pstrain_*.deb | head -1)"
say "    $DEB ($(du -h "$DEB" | cut -f1))"

say "2/4 a bookworm root filesystem (debootstrap --variant=minbase, $MIRROR)"
debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
  { tail -20 "$WORK/debootstrap.log"; fail "debootstrap failed"; }

say "3/4 installing the .deb and its dependencies into it"
cp "$DEB" "$WORK/rootfs/tmp/pstrain.deb"
for m in proc sys dev; do mount --bind "/$m" "$WORK/rootfs/$m"; done
chroot "$WORK/rootfs" /bin/sh -c '
  set -e
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends /tmp/pstrain.deb dataset-fashion-mnist openmpi-bin
  apt-get clean
  rm -rf /var/lib/apt/lists/* /tmp/pstrain.deb' >"$WORK/install.log" 2>&1 ||
  { tail -30 "$WORK/install.log"; fail "installing the .deb failed"; }
for m in proc sys dev; do umount "$WORK/rootfs/$m"; done

say "4/4 the OCI image ($OUT)"
umoci init --layout "$WORK/layout"
umoci new --image "$WORK/layout:cpu"
umoci unpack --rootless --image "$WORK/layout:cpu" "$WORK/bundle" >/dev/null
rm -rf "$WORK/bundle/rootfs"
mv "$WORK/rootfs" "$WORK/bundle/rootfs"
umoci repack --image "$WORK/layout:cpu" "$WORK/bundle"
umoci config --image "$WORK/layout:cpu" --config.entrypoint pstrain-launch \
  --config.cmd /usr/share/pstrain/configs/fashion_mnist_mlp_sync.yaml --config.workingdir /var/lib/pstrain \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
umoci gc --layout "$WORK/layout"
tar -C "$WORK/layout" -cf "$OUT" .
say "image $OUT: $(du -h "$OUT" | cut -f1) (root filesystem $(du -sh "$WORK/bundle/rootfs" | cut -f1))"

if [ "$CHECK" = 1 ]; then
  say "check: unpacking $OUT again and running its entrypoint inside it"
  mkdir -p "$WORK/check-layout"
  tar -C "$WORK/check-layout" -xf "$OUT"
  umoci unpack --image "$WORK/check-layout:cpu" "$WORK/check" >/dev/null
  R="$WORK/check/rootfs"
  for b in "$R"/usr/bin/pstrain-*; do
    if chroot "$R" ldd "/usr/bin/$(basename "$b")" | grep -q 'not found'; then
      chroot "$R" ldd "/usr/bin/$(basename "$b")" | grep 'not found'
      fail "$(basename "$b"): libraries missing in the image"
    fi
  done
  say "check: ldd resolves every library of $(ls "$R"/usr/bin/pstrain-* | wc -l) binaries"
  # The entrypoint on the default experiment, shortened to 200 steps.
  mkdir -p "$R/var/lib/pstrain"
  sed 's/^  epochs: 3$/  steps: 200/' "$R/usr/share/pstrain/configs/fashion_mnist_mlp_sync.yaml" >"$R/var/lib/pstrain/short.yaml"
  for m in proc sys dev; do mount --bind "/$m" "$R/$m"; done
  status=0
  chroot "$R" /bin/sh -c 'cd /var/lib/pstrain && pstrain-launch short.yaml --run_dir /var/lib/pstrain/run' \
    >"$WORK/check.log" 2>&1 || status=$?
  for m in proc sys dev; do umount "$R/$m"; done
  grep -E '^launch: (summary|all)' "$WORK/check.log" || true
  [ "$status" = 0 ] || { tail -30 "$WORK/check.log"; fail "the entrypoint failed inside the image (exit $status)"; }
  say "check: the entrypoint trained inside the image"
fi
