#!/usr/bin/env bash
# Builds stoker's media part for the FFmpeg whose development files pkg-config finds, into
# python/stoker/_media/ffmpegN/ (N: FFmpeg's major, from libavcodec's):
#   _media.abi3.so   the module, with no NEEDED entry for FFmpeg: stoker.ops._media_backend
#                    loads the libraries below first (so a missing FFmpeg is a clear error at
#                    the first audio/video call, and auditwheel finds no FFmpeg in the wheel)
#   libraries.txt    the FFmpeg libraries it was linked against, dependencies first
#   _media.pyi       its type stub
#   __init__.py      loads those libraries when the package is imported, before the module
# Usage: src/media/build.sh [--wheel] [--python PATH]
#   --wheel          links with zig for glibc 2.28 (manylinux_2_28), as `maturin build --zig` does
#                    for the core; without it, cargo's own linker (development).
#   --python PATH    built for that interpreter alone (_media.cpython-314t-....so beside the abi3
#                    module): a free-threaded CPython loads no abi3 module.
set -euo pipefail
cd "$(dirname "$0")/../.."
wheel=
interpreter=
while [ $# -gt 0 ]; do
    case "$1" in
        --wheel) wheel=1 ;;
        --python) interpreter=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift ;;  # absolute: cargo runs from target/
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
avcodec=$(pkg-config --modversion libavcodec | cut -d. -f1)
case "$avcodec" in
    58) major=4 ;; 59) major=5 ;; 60) major=6 ;; 61) major=7 ;; 62) major=8 ;;
    *) echo "libavcodec $avcodec is not an FFmpeg major stoker knows (4-8)" >&2; exit 1 ;;
esac
features=python,pyo3/extension-module,pyo3/abi3-py310
suffix=.abi3.so
if [ -n "$interpreter" ]; then
    features=python,pyo3/extension-module  # the same crates, PyO3 set up for this interpreter
    suffix=$("$interpreter" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
    export PYO3_PYTHON=$interpreter
fi
if [ -n "$wheel" ]; then
    # zig compiles with its own glibc 2.28 headers; the binding's build would add the system's
    # include folder (where FFmpeg's headers are) and mix two glibcs. So it gets a folder of its
    # own holding only FFmpeg's headers and libraries (the binding's FFMPEG_DIR route).
    headers=target/ffmpeg$major-only
    rm -rf "$headers" && mkdir -p "$headers/include" "$headers/lib"
    # The module is linked against stand-ins that export the same names, unversioned, under the
    # real sonames: it then asks for FFmpeg's symbols by name only, so loaded on its own (ldd, or
    # a loader that skips its package) it fails with "undefined symbol", not ld.so's assertion on
    # a version needed from a library that is not there; loaded by its package, after the real
    # libraries, each name binds to the library's default version.
    for library in libavutil libavcodec libavformat libswscale libswresample; do
        ln -s "$(pkg-config --variable=includedir "$library")/$library" "$headers/include/$library"
        real="$(pkg-config --variable=libdir "$library")/$library.so"
        soname=$(patchelf --print-soname "$(readlink -f "$real")")
        nm -D --defined-only "$real" | awk '$2 ~ /^[TW]$/ {sub(/@.*/, "", $3); print "void " $3 "(void) {}"}
                                            $2 ~ /^[DBRV]$/ {sub(/@.*/, "", $3); print "char " $3 "[8];"}' | sort -u >"$headers/$library.c"
        python -m ziglang cc -target x86_64-linux-gnu.2.28 -shared -fPIC -w -Wl,-soname,"$soname" \
            -o "$headers/lib/$library.so" "$headers/$library.c"
    done
    export FFMPEG_DIR=$PWD/$headers
    # zig names its own headers relative to the working directory when they lie under it (as
    # .venv's do under the checkout), and the binding's generator, run from another folder, would
    # not find them: the build runs from target/, where zig gives the absolute path.
    # Built by maturin, as the core is, into the same target folder: cargo then sees one
    # configuration (the linker is a wrapper named after the program that made it, maturin's or
    # cargo-zigbuild's, and each name rebuilt every crate for the other) and compiles the crates
    # both parts share once (from an empty folder: 756 s of CPU for both parts apart, 643 s
    # together). Only the .so is taken; its wheel is scratch.
    interpreter_argument=()
    [ -z "$interpreter" ] || interpreter_argument=(--interpreter "$interpreter")
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    (cd target && maturin build --quiet --release --zig --compatibility manylinux_2_28 --auditwheel skip \
        -m ../src/media/Cargo.toml --features "$features" ${interpreter_argument[@]+"${interpreter_argument[@]}"} --out "$scratch")
    built=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/lib_media.so
else
    cargo build --quiet --release -p stoker-media --features "$features"
    built=target/release/lib_media.so
fi
out=python/stoker/_media/ffmpeg$major
mkdir -p "$out"
# Made beside, then moved into place: a process that has the old module loaded keeps its file.
staged="$out/.staged.so"
cp "$built" "$staged"
# Dependencies first, so each library's own FFmpeg dependencies are loaded before it.
# Every file is written beside and moved into place: `make test` builds the free-threaded part
# while tests import the abi3 one from the same folder, and a reader must never find a file
# half written (libraries.txt empty: the module's FFmpeg symbols unresolved).
needed=$(patchelf --print-needed "$staged")
: >"$out/.libraries.txt"
for stem in libavutil libswresample libswscale libavcodec libavformat; do
    for library in $needed; do
        case "$library" in "$stem".so.*)
            echo "$library" >>"$out/.libraries.txt"
            patchelf --remove-needed "$library" "$staged" ;;
        esac
    done
done
mv -f "$staged" "$out/_media$suffix"
cp python/stoker/_media/_media.pyi "$out/._media.pyi"
cat >"$out/.__init__.py" <<PYTHON
"""stoker's media part built against FFmpeg $major (libavcodec $avcodec), made by src/media/build.sh."""

from .. import load_libraries

load_libraries(__path__[0])
PYTHON
mv -f "$out/.libraries.txt" "$out/libraries.txt"
mv -f "$out/._media.pyi" "$out/_media.pyi"
mv -f "$out/.__init__.py" "$out/__init__.py"
echo "media part for FFmpeg $major (libavcodec $avcodec): $out/_media$suffix, needs $(tr '\n' ' ' <"$out/libraries.txt")"
