#!/usr/bin/env bash
# Installs the Debian packages pstrain needs to build, test and run.
# Idempotent: packages already present are not touched. Works as root or via sudo.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgoogle-glog-dev libgflags-dev
  libboost-dev libboost-system-dev
  # security: OpenSSL checks the TLS files; openssl makes the test certificates
  libssl-dev openssl
  libdnnl-dev zlib1g-dev libyaml-cpp-dev libgloo-dev libucx-dev libeigen3-dev
  # image data: JPEG (libjpeg-turbo's TurboJPEG API, and its libjpeg API for
  # crop regions) and PNG decoding
  libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev
  # the mpi collective (Open MPI) and mpirun
  libopenmpi-dev openmpi-bin
  gnuplot-nox
  libgtest-dev libgmock-dev
  dataset-fashion-mnist
  python3 procps
  # promtool and curl (tests scrape /metrics and check the exposition)
  prometheus curl
  # emulated hosts (network namespaces, veth, bridge): the deploy test
  iproute2
  # tools/check.sh: the clang thread-safety build, sanitizers, format check,
  # function and file lengths (universal-ctags)
  clang-14 libclang-rt-14-dev clang-format-14 git universal-ctags
  # the compiler cache every build shares (tools/ccache_env.sh)
  ccache
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1
  fi
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
