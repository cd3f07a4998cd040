# deltatx — the two set-up commands are `make demo` and `make test`; both create .venv and install.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.deltatx-installed

.PHONY: demo test bench soak install clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Re-install whenever the dependency list changes.
$(STAMP): pyproject.toml Makefile | $(PY)
	$(PIP) install -q --upgrade pip 2>&1 | grep -v "is ignored" || true
	$(PIP) install -q -e '.[test,spark]' 2>&1 | grep -v "is ignored" || true
	$(PY) -c "import deltatx, pyarrow, deltalake, polars, duckdb, moto, hypothesis, pyspark"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m deltatx.demo

test: install
	$(PY) -m pytest

bench: install
	$(PY) -m benchmarks

soak: install
	$(PY) -m benchmarks.soak

clean:
	rm -rf $(VENV) demo-data .pytest_cache .hypothesis
