# Two commands do all the set-up on a fresh machine: `make test` and `make demo`.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
TOOLS   := .venv-tools
STAMP   := $(VENV)/.installed
TSTAMP  := $(TOOLS)/.installed

.PHONY: test demo bench venv tools clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# checkov pins boto3, so it lives in its own venv and never holds the project's boto3 back.
$(TSTAMP):
	test -x $(TOOLS)/bin/python || $(PY) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q --upgrade pip
	$(TOOLS)/bin/pip install -q checkov
	touch $(TSTAMP)

venv: $(STAMP)
tools: $(TSTAMP)

test: $(STAMP) $(TSTAMP)
	CHECKOV=$(abspath $(TOOLS))/bin/checkov $(BIN)/python -m pytest

demo: $(STAMP)
	$(BIN)/python -m autoscaler.demo

bench: $(STAMP)
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(TOOLS)
