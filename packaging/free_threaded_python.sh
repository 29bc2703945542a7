#!/usr/bin/env bash
# Builds CPython 3.14 free-threaded (3.14t: --disable-gil, PEP 703/779) into a cache folder and
# prints its interpreter's path; a second run finds it built and prints the path at once.
#   packaging/free_threaded_python.sh          build if needed, print .../bin/python3.14t
#   packaging/free_threaded_python.sh --gil    the same source built with the GIL: .../bin/python3.14
#                                              (benchmarks/loader/free_threaded.py's fair GIL side)
# The Makefile's free-threaded targets (make test-free-threaded, make wheel) call it.
#
# Where the source comes from: $STOKER_CPYTHON_SOURCE (a CPython 3.14 source archive or folder
# already here, e.g. python.org's Python-3.14.x.tar.xz), else the Go module proxy's copy of
# CPython's release tag (proxy.golang.org serves any public repository's tag as a zip), checked
# against the SHA-256 pinned below before anything is built: the one route on machines that
# reach package registries only (Debian serves them no python3.14 source package; PyPI and npm
# ship none).
# The build: no profile-guided optimisation (an hour on 2 cores; this interpreter runs tests and
# a benchmark whose figures are ratios against the GIL build, not records), no ensurepip (uv
# makes its virtual environments) and no test modules (CPython's own test suite, Lib/test: the
# most of what `make install` copies and compiles, and nothing of stoker's imports it).
set -euo pipefail
version=3.14.7
goproxy_sha256=e79b1270b4b62593f6686c8db8edd384b4a9b14e5824a8c9fce0a95656dd6321
if [ $# -gt 1 ] || { [ $# -eq 1 ] && [ "$1" != "--gil" ]; }; then
    echo "usage: $0 [--gil]   (free-threaded CPython 3.14, or with --gil the same built with the GIL)" >&2
    exit 2
fi
cache=${STOKER_PYTHON_CACHE:-${XDG_CACHE_HOME:-${HOME:?set STOKER_PYTHON_CACHE, or HOME}/.cache}/stoker/python}
if [ "${1:-}" = "--gil" ]; then
    prefix=$cache/$version
    interpreter=$prefix/bin/python3.14
    configure_gil=
    gil_check="assert sys._is_gil_enabled(), 'built without the GIL'"
else
    prefix=$cache/$version-freethreaded
    interpreter=$prefix/bin/python3.14t
    configure_gil=--disable-gil
    gil_check="assert not sys._is_gil_enabled(), 'built with the GIL'"
fi
complete=$prefix/.complete  # written last: a build cut short is built again
if [ -f "$complete" ] && [ -x "$interpreter" ]; then
    echo "$interpreter"
    exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.build.lock"  # two builds at once (make -j) wait for each other
flock 9
if [ -f "$complete" ] && [ -x "$interpreter" ]; then
    echo "$interpreter"
    exit 0
fi
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

fetch() {  # fetch URL SHA256 FILE: download, then check the pinned hash
    curl --fail --silent --show-error --location --max-time 600 --output "$3" "$1" || return 1
    if ! echo "$2  $3" | sha256sum --check --status; then
        echo "$1: not the pinned SHA-256 ($(sha256sum "$3" | cut -d' ' -f1)); not built" >&2
        return 1
    fi
}

source_folder=
if [ -n "${STOKER_CPYTHON_SOURCE:-}" ]; then
    if [ -d "$STOKER_CPYTHON_SOURCE" ]; then
        source_folder=$(cd "$STOKER_CPYTHON_SOURCE" && pwd)  # absolute: configure runs from the build folder
    else
        tar -xf "$STOKER_CPYTHON_SOURCE" -C "$work" && source_folder=$(echo "$work"/Python-*)
    fi
elif fetch "https://proxy.golang.org/github.com/python/cpython/@v/v$version+incompatible.zip" "$goproxy_sha256" "$work/source.zip"; then
    python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$work/source.zip" "$work"
    source_folder="$work/github.com/python/cpython@v$version+incompatible"
    chmod +x "$source_folder"/configure "$source_folder"/install-sh "$source_folder"/config.guess "$source_folder"/config.sub
fi
if [ -n "${STOKER_CPYTHON_SOURCE:-}" ] && { [ -z "$source_folder" ] || [ ! -x "$source_folder/configure" ]; }; then
    echo "STOKER_CPYTHON_SOURCE=$STOKER_CPYTHON_SOURCE: not a CPython source archive or folder (no executable configure in it)" >&2
    exit 1
elif [ -z "$source_folder" ] || [ ! -x "$source_folder/configure" ]; then
    echo "no CPython $version source could be fetched from proxy.golang.org; set STOKER_CPYTHON_SOURCE to one (python.org's tarball)" >&2
    exit 1
fi
echo "== building CPython $version ${configure_gil:+free-threaded }into $prefix (a few minutes, once) ==" >&2
rm -rf "$prefix"
build=$work/build
mkdir -p "$build"
(
    cd "$build"
    "$source_folder/configure" --quiet $configure_gil --disable-test-modules --prefix="$prefix" --without-ensurepip >"$work/configure.log" 2>&1 ||
        { tail -30 "$work/configure.log" >&2; exit 1; }
    make --quiet -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; exit 1; }
    # The standard library's bytecode is compiled at install, once per optimisation level; the
    # tests import it at level 0 only, and Python compiles what it imports on the first run.
    make --quiet install COMPILEALL_OPTS="-j0" >"$work/install.log" 2>&1 || { tail -40 "$work/install.log" >&2; exit 1; }
)
"$interpreter" -c "import sys; $gil_check" >&2
touch "$complete"
echo "$interpreter"
