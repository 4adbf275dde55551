# Sync Lab. The two commands of the README:
#   make book   build the HTML book into _build/html (creates .venv on first use)
#   make test   run the whole test suite (unit tests, nbval on solutions/, labs, book + browser)
# Also: make lab (JupyterLab on labs/), make labs (regenerate labs from solutions; make labs-force
#       overwrites edited ones after a backup),
#       make solutions (the deliberate measurement run: re-execute the solution notebooks, check every
#       timing figure against its claim, store their outputs; the book shows what it stored).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# three workers on two cores: while one waits on a kernel, a rank or a timeout, two compute
JOBS ?= 3

.PHONY: test lab labs labs-force solutions browser clean gpu-wheels gpu-check

# uv installs the pinned set in seconds where pip takes a minute and a half (most of make test's budget);
# pip is the fallback wherever uv cannot be had. Both read the wheels pip is pointed at.
# Bytecode: where PYTHONDONTWRITEBYTECODE is set, nothing would ever write the .pyc files, and every kernel
# and rank of the suite would compile torch again. Compiling all 12,000 files of the set (uv's
# --compile-bytecode) took 40 s; importing what the lab, its kernels and the book build import, once, with
# writing allowed, compiles the quarter of them that ever run.
UV_VERSION := 0.13.9
PIP := $(PY) -m pip install -q --disable-pip-version-check
UV_INSTALL := $(VENV)/bin/uv pip install -q --python $(PY) $${PIP_FIND_LINKS:+--find-links $$PIP_FIND_LINKS}
# the chapters' packages come from the registry (synclab.lab.chapters.import_all)
IMPORTED := synclab.lab.cli synclab.lab.notebook_runner \
  torch.distributed cloudpickle ipykernel.kernelapp nbclient nbval xdist nbgrader.apps playwright.sync_api \
  jupyter_book.cli.main myst_nb sphinx.application

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	{ $(PIP) uv==$(UV_VERSION) && $(UV_INSTALL) -r requirements.txt && $(UV_INSTALL) --no-deps -e . ; } || \
	  { echo "uv failed: installing with pip"; $(PIP) -r requirements.txt && \
	    $(PIP) --no-deps --no-build-isolation -e . ; }
	PYTHONDONTWRITEBYTECODE= $(PY) -c "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]; from synclab.lab.chapters import import_all; import_all()" $(IMPORTED)
	$(PY) -m compileall -q synclab  # the whole package, lazily imported parts too
	touch $@

include make/book.mk

# The browser test drives Chromium (Debian's, or the binary named by SYNCLAB_CHROMIUM);
# install it where we can (root with apt-get).
browser:
	@[ -n "$$SYNCLAB_CHROMIUM" ] || command -v chromium >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } ; } || \
	  { echo "The browser test needs Chromium: sudo apt-get install chromium (or set SYNCLAB_CHROMIUM)"; exit 1; }

# .pyc files may be written (into .venv and the ignored __pycache__ folders): a module the install did not
# import is compiled once, not in every kernel and rank that imports it.
test: $(VENV)/.installed browser
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest --nbval -n $(JOBS) --dist loadfile

# JupyterLab refuses to run as root unless told; in a container root is the usual user.
lab: $(VENV)/.installed
	$(VENV)/bin/jupyter lab labs/ $$([ "$$(id -u)" = 0 ] && echo --allow-root)

labs: $(VENV)/.installed
	$(PY) -m synclab labs

# Regenerate even the labs you edited; each edited one is first copied to labs/.backup/.
labs-force: $(VENV)/.installed
	$(PY) -m synclab labs --force

# The deliberate measurement run: the book shows what this stores. Run it on an idle machine.
solutions: $(VENV)/.installed
	$(PY) -m synclab measure
	$(PY) -m synclab labs

# Before a GPU run (../shared/gpu/README.md): the wheels the GPU machine lacks, into .whl/, and
# .gpu/on-device.sh. The script appends to .git/info/exclude, which a fresh clone may not have.
# On a machine with a CUDA GPU: smoke test, the CUDA half of the suite, every chapter's bench, nbval on the
# solutions and the rest of the suite; logs and data/reference/<device>/ in _build/gpu-check/gpu-check.tgz.
# STEPS="bench nbval" runs some of them.
gpu-check: $(VENV)/.installed
	PY=$(PY) tools/gpu-check.sh $(STEPS)

gpu-wheels:
	mkdir -p "$$(git rev-parse --git-path info)"
	../shared/gpu/wheels.sh
	# what the runbook's list lacks: chapter 3's ranks receive functions by cloudpickle
	python3 -m pip download -q --no-deps --only-binary=:all: -d .whl $$(grep -E '^cloudpickle==' requirements.txt) 2>&1 | grep -v "is ignored" || true
	bash -n .gpu/on-device.sh

clean: book-clean
	rm -rf .pytest_cache
