# The two commands of the README: `make test` and `make demo`. Both create .venv on
# first use and install the project with the exact versions of requirements.lock.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= outputs

.PHONY: test lint demo metrics-demo bench lock clean

$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev]'
	@touch $@

test: $(STAMP) lint
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .

# The main job (quick preset): corpora, both experiments, $(OUT)/reproduce/report.md.
demo: $(STAMP)
	$(BIN)/python -m experiments.reproduce --config=experiments/configs/reproduce.py:quick \
		--workdir=$(OUT)/reproduce --config.data_dir=$(OUT)/tensorflow_datasets

metrics-demo: $(STAMP)
	$(BIN)/python -m experiments.metrics_demo --out $(OUT)/metrics_demo

bench: $(STAMP)
	$(BIN)/python -m benchmarks.metrics --json benchmarks/results/metrics.json
	$(BIN)/python -m benchmarks.streaming --json benchmarks/results/streaming.json
	$(BIN)/python -m benchmarks.train --json benchmarks/results/train.json
	$(BIN)/python -m benchmarks.data --json benchmarks/results/data.json
	$(BIN)/python -m benchmarks.cost --json benchmarks/results/cost.json

# Re-resolve the newest versions into requirements.lock (in a throw-away environment).
lock:
	rm -rf /tmp/speech-lock-venv && $(PYTHON) -m venv /tmp/speech-lock-venv
	/tmp/speech-lock-venv/bin/python -m pip install --quiet '.[dev]'
	{ head -n 3 requirements.lock; /tmp/speech-lock-venv/bin/python -m pip freeze --exclude speech-tracking-jax | grep -v -E '^(pip|setuptools|wheel)=='; } > requirements.lock.new
	mv requirements.lock.new requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
