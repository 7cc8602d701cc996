# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint install clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# The tool alone (what `make demo` needs).
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

# Test tools and the Spark extra: the suite runs the Spark engine, a real RocketMQ and the
# official client, which the tests provision themselves (Maven Central, PyPI).
$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test,spark]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed-test

demo: $(VENV)/.installed
	@echo '$$ mqadmin consumerProgress -n mock://demo -g demo_group'
	@$(VENV)/bin/mqadmin consumerProgress -n mock://demo -g demo_group
	@echo
	@echo '$$ mqadmin resetOffsetByTime -n mock://demo -g demo_group -t TopicTest -s -30m --dry-run'
	@$(VENV)/bin/mqadmin resetOffsetByTime -n mock://demo -g demo_group -t TopicTest -s -30m --dry-run

# mypy and import-linter read an installed tree: the editable install maps mqadmin.commands
# onto commands/ with an import hook that static tools cannot follow.
lint: $(VENV)/.installed-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	rm -rf build/typecheck build/lib  # build/lib would carry modules deleted since into the copy
	$(PY) -m pip install -q --no-deps --target build/typecheck .
	cd build/typecheck && ../../$(PY) -m mypy --config-file ../../pyproject.toml mqadmin
	cd build/typecheck && PYTHONPATH=. ../../$(VENV)/bin/lint-imports --config ../../pyproject.toml

# --durations: the slowest tests, so a run's log shows where the suite's time goes
test: lint
	$(PY) -m pytest --durations=30

clean:
	rm -rf $(VENV) build *.egg-info
