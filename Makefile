# Two entry points, both from a fresh clone:
#   make bench   create .venv, install stoker (release build) and its peers, run `stoker bench`
#   make test    create .venv with the dev group, install, run the static checks (ruff, mypy,
#                stubtest, rustfmt, clippy), then the Rust and Python tests
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: bench test check build-tools install install-dev rust-test python-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# libjpeg-turbo (vendored in the turbojpeg-sys crate) builds with CMake, and its x86-64 SIMD with NASM.
# Audio and video link FFmpeg's libraries (found by pkg-config; the binding is generated with clang).
FFMPEG_PACKAGES := libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev pkg-config libclang-dev
build-tools:
	@command -v cmake >/dev/null 2>&1 || { echo "stoker's build needs CMake: apt-get install cmake (or your platform's package)"; exit 1; }
	@pkg-config --exists libavcodec libavformat libavutil libswscale libswresample 2>/dev/null || { \
		echo "stoker's build needs FFmpeg's development files: apt-get install $(FFMPEG_PACKAGES)"; exit 1; }
	@if [ "$$(uname -m)" = x86_64 ] && ! command -v nasm >/dev/null 2>&1; then \
		echo "stoker's build needs NASM for libjpeg-turbo's SIMD: apt-get install nasm (or your platform's package)"; exit 1; fi

# What an install depends on: a change here rebuilds; otherwise a second `make` starts at once.
BUILD_INPUTS := pyproject.toml Cargo.toml Cargo.lock $(wildcard src/*.rs src/*/*.rs)

install: $(VENV)/.installed-bench
install-dev: $(VENV)/.installed-dev

$(VENV)/.installed-bench: $(BIN)/python $(BUILD_INPUTS) | build-tools
	@echo "== building stoker's native core (Rust, optimized): 3-6 minutes the first time, seconds after =="
	$(BIN)/python -m pip install --quiet -e .
	@echo "== installing what stoker bench compares against: PyTorch + torchvision (about 1 GB, mostly CUDA"
	@echo "   libraries), SPDL, OpenCV, simplejpeg, and the S3/Cassandra/LMDB backends: a few minutes the first time =="
	$(BIN)/python -m pip install --progress-bar on -e '.[bench]'
	$(BIN)/python -c "import stoker._native"  # the install really worked
	@touch $@

$(VENV)/.installed-dev: $(BIN)/python $(BUILD_INPUTS) | build-tools
	@echo "== building stoker's native core and installing the test tools: a few minutes the first time =="
	$(BIN)/python -m pip install --quiet -e '.[lmdb,remote,report,parquet]' --group dev
	@touch $@

check: install-dev
	$(BIN)/ruff check python tests benchmarks
	$(BIN)/ruff format --check python tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest stoker._native
	cargo fmt --check
	cargo clippy --quiet --all-targets -- -D warnings
	cargo clippy --quiet --all-targets --features python -- -D warnings

bench: install
	$(BIN)/stoker bench

rust-test:
	cargo test --quiet

python-test: install-dev
	$(BIN)/python -m pytest

test: check rust-test python-test

clean:
	rm -rf $(VENV) target .pytest_cache
