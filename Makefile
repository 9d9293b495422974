# Two entry points, each sets itself up on a fresh machine: `make demo` and `make test`.
VENV   := .venv
PYTHON := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo test ui pdfs clean

$(STAMP): pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@

demo: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(VENV)/bin/rag-eval demo

test: $(STAMP)
	$(PYTHON) -m pytest

ui: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(VENV)/bin/dagster dev -h 127.0.0.1 -p 3000

pdfs: $(STAMP)
	$(PYTHON) scripts/build_demo_pdfs.py

clean:
	rm -rf warehouse $(DAGSTER_HOME)
