# deltatx — the two set-up commands are `make demo` and `make test`; both create .venv and install.
SHELL  := /bin/bash
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.deltatx-installed

.PHONY: demo test bench soak install clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Re-install whenever the dependency list changes. pip's own status decides (pipefail); only its
# "Location ... is ignored" noise is filtered out.
$(STAMP): pyproject.toml Makefile | $(PY)
	set -o pipefail; $(PIP) install -q --upgrade pip 2>&1 | { grep -v "is ignored" || true; }
	set -o pipefail; $(PIP) install -q -e '.[test,spark,catalog]' 2>&1 | { grep -v "is ignored" || true; }
	$(PY) -c "import deltatx, pyarrow, pyroaring, deltalake, polars, duckdb, duckdb_extension_delta, psycopg, moto, boto3, s3fs, hypothesis, pytest_timeout, pyspark"
	# catalog tests start a PostgreSQL server (tests/catalog/conftest.py): Debian's binaries
	test -x /usr/lib/postgresql/15/bin/initdb || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { apt-get update -q && apt-get install -y -q postgresql; }
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m deltatx.demo

test: install
	$(PY) -m pytest

# Bytecode first: a worker process that compiled a module inside a measured window (with
# PYTHONDONTWRITEBYTECODE set, every process would) would time the compiler, not the library.
bench: install
	$(PY) -m compileall -q src benchmarks
	$(PY) -m benchmarks

soak: install
	$(PY) -m benchmarks.soak

clean:
	rm -rf $(VENV) demo-data .pytest_cache .hypothesis
