#!/usr/bin/env bash
# Cross-builds sitegate for ARM controllers without Docker: rustup's std for the
# target, Debian's cross gcc as linker and C compiler (bundled SQLite, ring), set
# through environment variables so no .cargo/config.toml changes host builds.
#
#   cross/build.sh                  release binaries and .debs for both targets
#   cross/build.sh --check          `cargo check` only (what CI can afford)
#   cross/build.sh aarch64-unknown-linux-gnu      one target
#
# Binaries: target/<triple>/release/sitegate; packages: target/debian/*.deb.
# Installs what is missing (rustup target, gcc cross compiler) when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=build
targets=()
for arg in "$@"; do
  case "$arg" in
    --check) mode=check ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "unknown option $arg" >&2; exit 64 ;;
    *) targets+=("$arg") ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)

# triple -> the GNU prefix of Debian's cross toolchain, its C library package, and `file`'s words
gnu_prefix() {
  case "$1" in
    aarch64-unknown-linux-gnu) echo aarch64-linux-gnu ;;
    armv7-unknown-linux-gnueabihf) echo arm-linux-gnueabihf ;;
    *) echo "no cross toolchain known for $1" >&2; return 1 ;;
  esac
}
# The cross gcc only recommends its C library; installed with --no-install-recommends
# it cannot compile SQLite or ring ("bits/libc-header-start.h: No such file").
libc_dev() {
  case "$1" in
    aarch64-unknown-linux-gnu) echo libc6-dev-arm64-cross ;;
    armv7-unknown-linux-gnueabihf) echo libc6-dev-armhf-cross ;;
  esac
}
qemu_cmd() {
  case "$1" in
    aarch64-unknown-linux-gnu) echo qemu-aarch64 ;;
    armv7-unknown-linux-gnueabihf) echo qemu-arm ;;
  esac
}
file_arch() {
  case "$1" in
    aarch64-unknown-linux-gnu) echo "ARM aarch64" ;;
    armv7-unknown-linux-gnueabihf) echo "ARM, EABI5" ;;
  esac
}

for t in "${targets[@]}"; do
  prefix=$(gnu_prefix "$t")
  if ! rustup target list --installed | grep -qx "$t"; then
    echo "== rustup target add $t"
    rustup target add "$t"
  fi
  libc=$(libc_dev "$t")
  if ! command -v "$prefix-gcc" >/dev/null 2>&1 || [ ! -e "/usr/$prefix/include/stdint.h" ]; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "missing $prefix-gcc or its C library: apt-get install gcc-$prefix $libc" >&2
      exit 1
    fi
    echo "== apt-get install gcc-$prefix $libc"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "gcc-$prefix" "$libc" >/dev/null
  fi

  # Cargo's and the cc crate's per-target variables: CARGO_TARGET_<TRIPLE>_LINKER,
  # CC_<triple>, AR_<triple>.
  upper=$(echo "$t" | tr 'a-z-' 'A-Z_')
  lower=$(echo "$t" | tr '-' '_')
  export "CARGO_TARGET_${upper}_LINKER=$prefix-gcc"
  export "CC_${lower}=$prefix-gcc"
  export "AR_${lower}=$prefix-ar"

  if [ "$mode" = check ]; then
    echo "== cargo check --locked --target $t"
    cargo check --locked --target "$t"
    continue
  fi

  echo "== cargo build --release --locked --target $t"
  cargo build --release --locked --target "$t"
  bin="target/$t/release/sitegate"
  desc=$(file -b "$bin")
  echo "$bin: $(stat -c %s "$bin") bytes; $desc"
  case "$desc" in
    *"$(file_arch "$t")"*) ;;
    *) echo "$bin is not an $(file_arch "$t") binary" >&2; exit 1 ;;
  esac
  glibc=$("$prefix-objdump" -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  echo "$bin: needs $glibc or later"
  # With Debian's qemu-user the binary runs here: a smoke test of the build.
  if command -v "$(qemu_cmd "$t")" >/dev/null 2>&1; then
    "$(qemu_cmd "$t")" -L "/usr/$prefix" "$bin" check-config config/default.toml
  else
    echo "(install qemu-user to run $bin check-config here)"
  fi

  # rustc already stripped the binary (profile.release strip = true); the host's
  # strip cannot read ARM objects.
  echo "== cargo deb --target $t --no-build --no-strip"
  cargo deb --target "$t" --no-build --no-strip
done
