# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= test

.PHONY: demo test lint install clean

$(VENV)/.installed-$(EXTRAS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

install: $(VENV)/.installed-$(EXTRAS)

demo: EXTRAS = test
demo: install
	@echo '$$ mqadmin consumerProgress -n mock://demo -g demo_group'
	@$(VENV)/bin/mqadmin consumerProgress -n mock://demo -g demo_group
	@echo
	@echo '$$ mqadmin resetOffsetByTime -n mock://demo -g demo_group -t TopicTest -s -30m --dry-run'
	@$(VENV)/bin/mqadmin resetOffsetByTime -n mock://demo -g demo_group -t TopicTest -s -30m --dry-run

# mypy and import-linter read an installed tree: the editable install maps mqadmin.commands
# onto commands/ with an import hook that static tools cannot follow.
lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	rm -rf build/typecheck
	$(PY) -m pip install -q --no-deps --target build/typecheck .
	cd build/typecheck && ../../$(PY) -m mypy --config-file ../../pyproject.toml mqadmin
	cd build/typecheck && PYTHONPATH=. ../../$(VENV)/bin/lint-imports --config ../../pyproject.toml

test: lint
	$(PY) -m pytest

clean:
	rm -rf $(VENV) build *.egg-info
