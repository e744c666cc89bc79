#!/bin/bash
# libelu as other projects take it: app.c built against the library
# installed from a build directory, through pkg-config and through CMake's
# find_package, and against libelu as a Meson subproject. Each program must
# run, report the installed version, and need no libxxhash. One line per
# way; a non-zero exit if any fails.
#   tests/consumers/run.sh [build directory, default build]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
here=$src/tests/consumers
build=$(cd "${1:-$src/build}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# fail WAY WHAT [LOG]: say what went wrong, with the log's end, and stop.
fail() {
    echo "$1: FAILED: $2"
    [ -z "${3:-}" ] || tail -30 "$3"
    exit 1
}

# Install into a staging root, as a package build does: the files keep the
# configured prefix inside it, so each way below must find them where they
# were moved to.
meson install -C "$build" --destdir "$tmp/root" >"$tmp/install.log" 2>&1 ||
    fail install "meson install" "$tmp/install.log"
read -r prefix libdir < <(meson introspect "$build" --buildoptions | python3 -c '
import json, sys
options = {o["name"]: o["value"] for o in json.load(sys.stdin)}
print(options["prefix"], options["libdir"])')
root=$tmp/root$prefix
case $libdir in
/*) lib=$tmp/root$libdir ;;
*) lib=$root/$libdir ;;
esac
# elu.pc is found alone (PKG_CONFIG_LIBDIR, no other .pc file): it may
# require nothing.
pc() { PKG_CONFIG_LIBDIR=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$tmp/root pkg-config "$@"; }
version=$(pc --modversion elu) || fail pkg-config "elu.pc not usable on its own"

# check WAY PROGRAM [LOG]: it runs, prints the installed version, and no
# library it loads is libxxhash.
check() {
    local out
    out=$(LD_LIBRARY_PATH=$lib "$2" 2>&1) || fail "$1" "app: $out"
    [ "$out" = "$version" ] || fail "$1" "app reports $out, elu.pc $version"
    if LD_LIBRARY_PATH=$lib ldd "$2" | grep -q xxhash; then
        fail "$1" "app loads libxxhash"
    fi
}

# 1. pkg-config.
flags=$(pc --cflags --libs elu 2>"$tmp/pc.log") || fail pkg-config "pkg-config --cflags --libs elu" "$tmp/pc.log"
cc "$here/app.c" $flags -lm -o "$tmp/app-pkgconfig" 2>"$tmp/cc.log" || fail pkg-config "cc" "$tmp/cc.log"
check pkg-config "$tmp/app-pkgconfig"
echo "pkg-config: app built with \$(pkg-config --cflags --libs elu) runs libelu $version, without libxxhash"

# 2. CMake: find_package(elu CONFIG), elu::elu.
{ cmake -S "$here/cmake" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$root" &&
  cmake --build "$tmp/cmake"; } >"$tmp/cmake.log" 2>&1 || fail cmake "build" "$tmp/cmake.log"
check cmake "$tmp/cmake/app"
echo "cmake: app built with find_package(elu CONFIG) and elu::elu runs libelu $version, without libxxhash"

# 3. A Meson parent project with libelu at subprojects/elu: it builds the
# library alone (and elu-ptx-gen, which runs at build time to make the PTX
# built into it), and its tests do not join the parent's. (dependency('elu')
# falls back to the subproject by itself where no libelu is installed; the
# option makes sure of it.)
parent=$tmp/meson
mkdir -p "$parent/subprojects"
cp "$here/meson/meson.build" "$here/app.c" "$parent/"
ln -s "$src" "$parent/subprojects/elu"
{ meson setup "$parent/build" "$parent" --force-fallback-for=elu &&
  meson compile -C "$parent/build"; } >"$tmp/meson.log" 2>&1 ||
    fail meson "build" "$tmp/meson.log"
tests=$(meson test -C "$parent/build" --list --no-rebuild 2>/dev/null)
[ "$tests" = app ] || fail meson "the parent's tests are $(echo $tests), not app alone"
programs=$(meson introspect "$parent/build" --targets | python3 -c '
import json, sys
print(" ".join(sorted(t["name"] for t in json.load(sys.stdin) if t["type"] == "executable")))')
[ "$programs" = "app elu-ptx-gen" ] || fail meson "programs built: $programs"
check meson "$parent/build/app"
echo "meson: app built with libelu as a subproject runs libelu $version, without libxxhash; the parent builds no other program but libelu's build-time elu-ptx-gen, and lists no other test"
