# Two commands do all the set-up on a fresh machine: `make test` and `make demo`.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
TOOLS   := .venv-tools
STAMP   := $(VENV)/.installed
TSTAMP  := $(TOOLS)/.installed

.PHONY: test setup budget check lint typecheck demo demo-mig bench chaos venv tools debs clean

# torch's CPU build and the project through uv (from PyPI, resolved and installed in parallel; an
# installed torch satisfies the extras alone). Where pip is set up to find the CPU wheel on disk
# (its find-links, TORCH_WHEELS), uv installs that very file in the same command as the project
# (the same packages as two commands, 19.7 s against 10.5 + 12.4 s here); elsewhere `pip install
# torch==2.13.0` takes it as pip finds it first (uv, asked for torch by name, would fetch a CUDA
# build of several GB). On a clean clone here the venv took 47 s with pip for torch (8 s upgrading
# pip and fetching uv, 23 s torch, 17 s the project) and 23 s with uv for torch (2, 11 and 11 s);
# earlier, `make venv tools` took 86 s and 69 s with pip for everything, checkov's venv 26 s and
# 22 s with pip against 8 s and 6 s with uv.
UV           := $(BIN)/uv pip install -q --compile-bytecode
TORCH_WHEELS ?= $(or $(PIP_FIND_LINKS),/opt/wheels)
PYTAG         = $(shell $(PY) -c 'import sys; print("cp%d%d" % sys.version_info[:2])' 2>/dev/null)
TORCH_WHEEL   = $(firstword $(foreach d,$(TORCH_WHEELS),$(wildcard $(d)/torch-2.13.0+cpu-$(PYTAG)-*.whl)))

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q uv
	$(if $(TORCH_WHEEL),,$(BIN)/pip install -q torch==2.13.0)
	$(UV) --python $(BIN)/python $(TORCH_WHEEL) -e '.[dev]'
	touch $(STAMP)

# checkov pins boto3, so it lives in its own venv and never holds the project's boto3 back.
$(TSTAMP): $(STAMP)
	test -x $(TOOLS)/bin/python || $(PY) -m venv --without-pip $(TOOLS)
	test -x $(BIN)/uv || $(BIN)/pip install -q uv
	$(UV) --python $(TOOLS)/bin/python checkov
	touch $(TSTAMP)

venv: $(STAMP)
tools: $(TSTAMP)

# Debian packages the tests and the demo start for real, as PACKAGE:COMMAND. Installed when missing
# and this runs as root with apt; otherwise make stops at once and names them.
# prometheus ships promtool (tests/test_deploy_prometheus.py checks deploy/prometheus with it); the
# package also enables a Prometheus server on :9090, which a fresh install here stops and disables
# again: the tests need the tool, not the daemon.
DEBS := openssh-server:/usr/sbin/sshd openssh-client:ssh-keygen haproxy:haproxy socat:socat prometheus:promtool
debs:
	@missing=$$(for d in $(DEBS); do c=$${d#*:}; command -v $$c >/dev/null 2>&1 || echo $${d%%:*}; done | sort -u | tr '\n' ' '); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian packages: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	    case " $$missing " in *" prometheus "*) systemctl disable --now prometheus >/dev/null 2>&1 || true ;; esac; \
	  else echo "missing Debian packages: $$missing(run: sudo apt-get install -y $$missing)" >&2; exit 1; fi; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy, strict on the pure folders (configured in pyproject.toml's [tool.mypy]).
typecheck: $(STAMP)
	$(BIN)/mypy

# pytest-xdist workers. The e2e tests mostly wait (on processes booting, leases, drains), so more
# workers than cores pays, up to a point: their timing checks (a takeover within lease_s + a tick)
# fail on a machine loaded many times over. `--dist loadgroup` honours the `xdist_group` markers of the
# modules that share one costly module-scoped fixture, so it is built once (tests/kit/xdist_groups.py
# makes that work under pytest 9, where xdist's own grouping is lost). Three workers: on a clean
# clone on 2 quiet cores, pytest took 564 s with two and 488 s with three (each worker was busy only
# 22 to 30 % of the time at two); at four, clean-clone runs failed a different timing-bound e2e test
# each time (a remote gateway over ssh, a SIGTERMed run). Override: `make test WORKERS=2`.
WORKERS ?= 3
XDIST   := -n $(WORKERS) --dist loadgroup

# pytest's environment. PYTHONDONTWRITEBYTECODE (set on some CI images) is cleared: the suite starts
# hundreds of Python processes (agents, servers, `igniter run`), and with it set each one compiled
# the project's modules again and each worker rewrote every test module again (collection: 13 s of
# CPU without the bytecode, 7 s with it).
BYTECODE   := env -u PYTHONDONTWRITEBYTECODE
PYTEST_ENV := $(BYTECODE) CHECKOV=$(abspath $(TOOLS))/bin/checkov

# The tests that compute for a long stretch without waiting, run alone after the parallel run (a
# pytest of their own, no workers): the README's 14-day replay takes 16 to 20 s of CPU on a quiet
# core, by the host's speed, and beside three workers on two cores it took 30 to 41 s in clean-clone
# runs, past the 30 s a test may take (tests/README.md). Run during the set-up instead, beside
# checkov's venv (uv compiling its bytecode on both cores) and mypy, it took 23.6 to 30.4 s: no
# margin. Alone it takes what it costs, some 20 s of `make test`'s wall time (577 s in all in the
# clean-clone run that measured it). A node id that no longer names a test fails that pytest.
SOLO := tests/cli/test_simulate.py::test_the_documented_example

# The set-up steps, run side by side by `make setup` and `make test`.
SETUP := $(STAMP) $(TSTAMP) debs lint typecheck

# The whole suite: lint and types, then every tier (unit, property, e2e, slow) in parallel but
# SOLO, then SOLO alone; it fails if a step of the set-up or either run fails. Each pytest ends with
# its slowest tests (setup and teardown counted apart), so a CI log shows where the time went. The
# set-up steps run side by side (`setup`): on a fresh machine apt-get installs the Debian packages
# while pip and uv build the venvs, and lint and types run beside checkov's venv.
test: setup
	$(PYTEST_ENV) $(BIN)/python -m pytest $(XDIST) --durations=25 $(addprefix --deselect ,$(SOLO)); parallel=$$?; \
	$(PYTEST_ENV) $(BIN)/python -m pytest --durations=5 $(SOLO); alone=$$?; \
	[ $$parallel -eq 0 ] && [ $$alone -eq 0 ]

setup:
	@$(MAKE) --no-print-directory -j4 --output-sync=target $(SETUP)

# The suite's time against its budget (tests/README.md): the runs of `make test` (same workers, then
# SOLO alone), with every test's duration kept in BUDGET_OUT; then the tests over 30 s and the wall
# time against 10 min. It prints and never fails on a timing; it exits non-zero only when a test
# fails. A subset, in one parallel run: `make budget PYTEST_ARGS=tests/core`.
BUDGET_OUT  ?= out/durations.txt
PYTEST_ARGS ?=
budget: $(STAMP) $(TSTAMP) debs
	@mkdir -p $(dir $(BUDGET_OUT))
	@start=$$(date +%s); \
	{ if [ -n "$(PYTEST_ARGS)" ]; then $(PYTEST_ENV) $(BIN)/python -m pytest $(XDIST) --durations=0 $(PYTEST_ARGS); rc=$$?; \
	  else $(PYTEST_ENV) $(BIN)/python -m pytest $(XDIST) --durations=0 $(addprefix --deselect ,$(SOLO)); rc=$$?; \
	    $(PYTEST_ENV) $(BIN)/python -m pytest --durations=0 $(SOLO) || rc=1; fi; \
	  echo $$rc > $(BUDGET_OUT).rc; } 2>&1 | tee $(BUDGET_OUT); \
	$(BIN)/python -m tests.kit.budget $(BUDGET_OUT) --wall $$(( $$(date +%s) - start )); \
	exit $$(cat $(BUDGET_OUT).rc)

# The fast loop: lint, then the pure and in-process tiers (no e2e, nothing slow), in parallel: one
# worker per CPU (these tests compute, they do not wait; each worker also imports and collects the
# suite once: on 2 CPUs, 4 workers took 150 s and 70 s of CPU, 2 workers 106 s and 52 s). Each
# hypothesis property draws a quarter of its examples here (tests/kit/examples.py): at their full
# counts they took a third of this run's CPU. `make test` draws them all. `--dist worksteal`: a worker
# that runs out takes tests queued for the other, instead of idling while it finishes a long batch.
CHECK_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
CHECK_SHARE   ?= 0.25
check: $(STAMP) lint
	$(BYTECODE) IGNITER_EXAMPLE_SHARE=$(CHECK_SHARE) $(BIN)/python -m pytest -m "not e2e and not slow" \
		-n $(CHECK_WORKERS) --dist worksteal -q

demo: $(STAMP) debs
	$(BIN)/python -m autoscaler.demo

# A MIG re-cut under live load: fake A100 slices, real servers, the real gateway (needs ../shared).
demo-mig: $(STAMP) debs
	$(BIN)/python -m autoscaler.demo.mig

# The long probe suite (tests/chaos repeated: CHAOS_TRIALS trials and kills each); make test runs
# its quick subset once.
chaos: $(STAMP) debs
	$(BIN)/python -m tests.chaos.run --trials 20

bench: $(STAMP)
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(TOOLS)
