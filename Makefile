# Two entry points, both self-bootstrapping from a fresh clone: `make demo`, `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv demo test test-fast clean

venv: $(STAMP)

# torch first and pinned, so pip takes the local CPU wheel and never a CUDA build.
# lava-nc 0.10.0 declares python<3.11: installed without its metadata checks; its
# real dependencies are pinned in pyproject.toml.
$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	# Ray (optional extra: `spikec verify --ray`); it pulls no torch. Never fails the set-up.
	# Every install that resolves dependencies comes before the --no-deps ones below: pip checks the whole
	# environment after a resolving install, and would print a resolver ERROR for their undeclared-on-purpose
	# dependencies (spikingjelly's matplotlib, ...). Keep new resolving installs above this line.
	$(BIN)/pip install --quiet ray==2.60.0 || echo "ray not installed: spikec verify --ray is unavailable, its test skips"
	# matplotlib: Sinabs imports pylab at package import (a user's `import sinabs` before spikec failed here); a normal
	# `pip install sinabs` brings it. numpy stays below 2 as pyproject.toml pins it.
	$(BIN)/pip install --quiet "matplotlib>=3.8,<3.11" "numpy>=1.24.4,<2"
	$(BIN)/pip install --quiet --no-deps --ignore-requires-python lava-nc==0.10.0
	# spikingjelly (optional frontend extra): its declared torchvision/torchaudio do not import
	# beside torch 2.13; its neuron module needs only loguru.
	$(BIN)/pip install --quiet --no-deps spikingjelly==2.0.0 "loguru>=0.7,<1"
	# NIR consumers (nir target conformance). norse declares torchvision, which does not import beside
	# torch 2.13 and which norse.torch does not use; nirtorch is what snntorch.import_nir and norse need.
	$(BIN)/pip install --quiet --no-deps norse==1.1.0 nirtorch==2.6
	# sinabs (optional frontend extra): its declared samna and matplotlib are not needed by its layers (spikec
	# stubs pylab, which sinabs imports only to plot), and its nir<=1.0.4 pin would downgrade spikec's nir (its
	# own NIR export, unused here, is what pins it; it imports beside nir 1.0.8); the layers need pbr, and nirtorch
	# from the line above.
	$(BIN)/pip install --quiet --no-deps sinabs==3.1.3 pbr
	# lava-dl (netx HDF5 loader for the lava target's model.net check; declares python<3.11 like lava-nc);
	# its slayer needs torchvision,
	# which does not import here: spikec stubs what netx does not use and says so in the report.
	$(BIN)/pip install --quiet --no-deps --ignore-requires-python lava-dl==0.6.0
	# xylo target: Rockpool's XyloSim for Xylo Audio 2 and xylosim, SynSense's C++ bit-accurate core it runs on.
	# --no-deps: syns61201.XyloSim needs neither rockpool's optional backends nor samna (closed, not installable;
	# spikec enters rockpool.devices.xylo without the samna-only modules, spikec/targets/xylo/_shim.py).
	$(BIN)/pip install --quiet --no-deps rockpool==3.1.0 xylosim==0.1.3
	# Headless Chromium renders report.html in a test; installed where we can (root with apt), else that
	# one test skips and says why. Never fails the set-up.
	command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    timeout 600 sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium' \
	    >/dev/null 2>&1; } || echo "chromium not installed: the report.html browser test will skip"
	touch $(STAMP)

# spikec's bytecode, written once here: where PYTHONDONTWRITEBYTECODE is set (this workplace's shells set it) no
# process writes any, so every process -- each Lava job too, whose ProcessModel search executes every module of
# spikec's procs/ per process type -- would compile spikec from source again (measured: 0.41 -> 0.34 s a small
# Lava job). Incremental: only changed files are compiled; __pycache__ is git-ignored.
BYTECODE = $(BIN)/python -m compileall -q spikec >/dev/null

demo: $(STAMP)
	$(BYTECODE)
	$(BIN)/python -m spikec.app.cli compile examples/digits/model.py:small \
	    --weights examples/digits/checkpoint.pt --inputs examples/digits/inputs.npz \
	    -o build/demo --passes default --target lava

# The whole suite over pytest-xdist's workers, one per core (TEST_WORKERS=0: serially, in one process); each
# worker takes whole files (a module's shared compiled fixtures are built once), in tests/conftest.py's order.
# test-fast: the fast tier only, the core, frontend and passes (tests/conftest.py says which paths are slow).
TEST_WORKERS ?= auto
XDIST = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: $(STAMP)
	$(BYTECODE)
	$(BIN)/python -m pytest $(XDIST)

test-fast: $(STAMP)
	$(BYTECODE)
	$(BIN)/python -m pytest $(XDIST) -m "not slow"

clean:
	rm -rf build
