#!/usr/bin/env bash
# The native libraries the engine links, built from pinned upstream releases into PREFIX:
# cibuildwheel's before-all ([tool.cibuildwheel] in pyproject.toml) on the manylinux
# containers and the macOS runners, whose package managers lack some of them or ship
# them built for a newer macOS than the wheels target. zstd, brotli and snappy are shared
# libraries (auditwheel / delocate copy them into the wheel); HighwayHash, which has no
# release tags and no portable shared-library build, is a static PIC library at the
# commit Debian packages (0~git20200803.9490b14).
#
#   bash tests/dist/build_deps.sh /usr/local            # Linux, as root in the container
#   bash tests/dist/build_deps.sh "$HOME/arrayds-deps"  # macOS
#
# Needs curl, tar, make, cmake and a C/C++ compiler; on macOS, MACOSX_DEPLOYMENT_TARGET
# (set by cibuildwheel) decides the oldest macOS the libraries run on.
set -euo pipefail

prefix=${1:?usage: build_deps.sh PREFIX}
ZSTD_VERSION=1.5.7
BROTLI_VERSION=1.1.0
SNAPPY_VERSION=1.2.1
HIGHWAYHASH_COMMIT=9490b14905490ae8a595fa35e2ab336647f378f1

jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$prefix/lib" "$prefix/include"

if ! command -v pkg-config >/dev/null; then
  if command -v dnf >/dev/null; then
    dnf install -y -q pkgconf-pkg-config
  elif command -v brew >/dev/null; then
    brew install pkgconf
  fi
fi
command -v cmake >/dev/null || python3 -m pip install -q cmake

fetch() {  # URL -> unpacked into $work
  curl -fsSL --retry 3 "$1" | tar -xz -C "$work"
}

cmake_install() {  # SOURCE_DIR [CMAKE ARGS...]
  local src=$1
  shift
  cmake -S "$src" -B "$src/_build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_INSTALL_NAME_DIR="$prefix/lib" -DCMAKE_POSITION_INDEPENDENT_CODE=ON "$@"
  cmake --build "$src/_build" --parallel "$jobs"
  cmake --install "$src/_build"
}

fetch "https://github.com/facebook/zstd/releases/download/v$ZSTD_VERSION/zstd-$ZSTD_VERSION.tar.gz"
cmake_install "$work/zstd-$ZSTD_VERSION/build/cmake" -DZSTD_BUILD_PROGRAMS=OFF \
  -DZSTD_BUILD_TESTS=OFF -DZSTD_BUILD_STATIC=OFF -DZSTD_BUILD_SHARED=ON

fetch "https://github.com/google/brotli/archive/refs/tags/v$BROTLI_VERSION.tar.gz"
cmake_install "$work/brotli-$BROTLI_VERSION" -DBUILD_SHARED_LIBS=ON -DBROTLI_DISABLE_TESTS=ON

fetch "https://github.com/google/snappy/archive/refs/tags/$SNAPPY_VERSION.tar.gz"
cmake_install "$work/snappy-$SNAPPY_VERSION" -DBUILD_SHARED_LIBS=ON \
  -DSNAPPY_BUILD_TESTS=OFF -DSNAPPY_BUILD_BENCHMARKS=OFF

fetch "https://github.com/google/highwayhash/archive/$HIGHWAYHASH_COMMIT.tar.gz"
hh="$work/highwayhash-$HIGHWAYHASH_COMMIT"
case "$(uname -m)" in
  aarch64 | arm64) hh_arch=HH_AARCH64=1 ;;  # its Makefile assumes x86-64 otherwise
  *) hh_arch= ;;
esac
# shellcheck disable=SC2086  # $hh_arch is one word or none
make -C "$hh" -j "$jobs" $hh_arch lib/libhighwayhash.a
mkdir -p "$prefix/include/highwayhash"
cp "$hh"/highwayhash/*.h "$prefix/include/highwayhash/"
cp "$hh/lib/libhighwayhash.a" "$prefix/lib/"

if [ "$(uname -s)" = Linux ] && [ -w /etc/ld.so.conf.d ]; then
  # auditwheel finds the libraries through the loader's search path
  echo "$prefix/lib" >/etc/ld.so.conf.d/arrayds-deps.conf
  ldconfig
fi
echo "build_deps.sh: zstd $ZSTD_VERSION, brotli $BROTLI_VERSION, snappy $SNAPPY_VERSION," \
  "highwayhash ${HIGHWAYHASH_COMMIT:0:7} in $prefix"
