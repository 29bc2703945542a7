# Two entry points, both from a fresh clone:
#   make bench   create .venv, install stoker (release build) and its peers, run `stoker bench`
#   make test    create .venv with the dev group, install, run the static checks (ruff, mypy,
#                stubtest, rustfmt, clippy), then the Rust and Python tests
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: bench test check install install-dev rust-test python-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[bench]'

install-dev: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[lmdb,remote,report]' --group dev

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
