# Two entry points, both from a fresh clone:
#   make bench   create .venv, install stoker (release build) and its peers, run `stoker bench`
#   make test    create .venv with the dev extras, install, run the Rust and Python tests
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: bench test install install-dev rust-test python-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[bench]'

install-dev: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'

bench: install
	$(BIN)/stoker bench

rust-test:
	cargo test --quiet

python-test: install-dev
	$(BIN)/python -m pytest

test: rust-test python-test

clean:
	rm -rf $(VENV) target .pytest_cache
