# The two commands of the README: `make test` and `make demo`. Both create .venv on
# first use and install the project with the exact versions of requirements.lock.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= outputs

.PHONY: venv voices test suite-profile lint demo studies metrics-demo bench lock clean clean-cache gpu-check gpu-wheels

$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[full,synth,dev]'
	@touch $@

# The environment alone (make test and make demo build it too).
venv: $(STAMP)

# Festival and its three English voices (Debian packages), the third synthesiser of the
# engine sets "festival" and "all" (speechkit.tts.festival). Needs Debian's apt-get and
# root (or sudo); says so and stops otherwise.
FESTIVAL_PACKAGES := festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts
voices:
	@command -v apt-get >/dev/null || { echo "make voices: needs Debian's apt-get; install Festival and the voices $(FESTIVAL_PACKAGES) with your system's packages"; exit 2; }
	@if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else echo "make voices: needs root or sudo to run: apt-get install $(FESTIVAL_PACKAGES)"; exit 2; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(FESTIVAL_PACKAGES)
	@festival --version

# Test files run in parallel worker processes (pytest-xdist), one file per worker at a
# time so a module's fixtures are built once; a worker per core, at most 4. Files in
# collection order, where tests/conftest.py puts those with end-to-end tests first (xdist
# would otherwise order them by test count, and the longest ones often started last).
PYTEST_PARALLEL := -n auto --maxprocesses=4 --dist loadfile --no-loadscope-reorder
test: $(STAMP) lint
	$(BIN)/python -m pytest $(PYTEST_PARALLEL)

# The suite as `make test` runs it, with each test's seconds and JAX compilation summed
# per file (benchmarks/suite.py, docs/benchmarks.md).
suite-profile: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) -p benchmarks.suite \
		--suite-profile=benchmarks/results/suite.json

lint: $(STAMP)
	$(BIN)/ruff check .

# The main job (quick preset): corpora, both experiments, $(OUT)/reproduce/report.md.
demo: $(STAMP)
	$(BIN)/python -m experiments.reproduce --config=experiments/configs/reproduce.py:quick \
		--workdir=$(OUT)/reproduce --config.data_dir=$(OUT)/tensorflow_datasets

# The studies (quick preset; the corpora of the main job, built if missing):
# $(OUT)/studies/studies.md, figures and studies.json.
studies: $(STAMP)
	$(BIN)/python -m experiments.studies --config=experiments/configs/studies.py:quick \
		--workdir=$(OUT)/studies --config.data_dir=$(OUT)/tensorflow_datasets

metrics-demo: $(STAMP)
	$(BIN)/python -m experiments.metrics_demo --out $(OUT)/metrics_demo

bench: $(STAMP)
	$(BIN)/python -m benchmarks.metrics --json benchmarks/results/metrics.json
	$(BIN)/python -m benchmarks.streaming --json benchmarks/results/streaming.json
	$(BIN)/python -m benchmarks.train --json benchmarks/results/train.json
	$(BIN)/python -m benchmarks.data --json benchmarks/results/data.json
	$(BIN)/python -m benchmarks.cost --json benchmarks/results/cost.json
	$(BIN)/python -m benchmarks.pooling --json benchmarks/results/pooling.json
	$(BIN)/python -m benchmarks.export_backends --json benchmarks/results/export_backends.json
	$(BIN)/python -m benchmarks.installs --json benchmarks/results/installs.json
	$(BIN)/python -m benchmarks.evaluate_speed --json benchmarks/results/evaluate_speed.json

# The device check (docs/gpu.md): on a machine with a CUDA or TPU jax, and no
# .venv or registry, run with that machine's Python; < 9 minutes; writes
# benchmarks/results/gpu-<device>.json. GPU_CHECK_ARGS="--allow-cpu --quick" rehearses on CPU.
GPU_PYTHON ?= python3
GPU_CHECK_ARGS ?=
gpu-check:
	$(GPU_PYTHON) -m benchmarks.gpu_check $(GPU_CHECK_ARGS)

# Wheels gpu-check unpacks where they are missing (sequence-layers and what it needs, the
# versions of requirements.lock), fetched on a machine with pip into .whl/ (git-ignored).
GPU_WHEEL_PYTHON ?= 3.12
gpu-wheels: $(STAMP)
	mkdir -p .whl && echo '*' > .whl/.gitignore
	$(BIN)/python -m pip download --quiet --no-deps --only-binary=:all: \
		--python-version $(GPU_WHEEL_PYTHON) --platform manylinux2014_x86_64 \
		--platform manylinux_2_28_x86_64 -d .whl $$($(BIN)/python -m benchmarks.gpu_check --wheel-specs)
	@du -sh .whl

# Re-resolve the newest versions into requirements.lock (in a throw-away environment).
lock:
	set -e; venv=$$(mktemp -d); trap 'rm -rf "$$venv"' EXIT; \
	$(PYTHON) -m venv "$$venv"; \
	"$$venv/bin/python" -m pip install --quiet '.[full,synth,dev]'; \
	{ head -n 3 requirements.lock; "$$venv/bin/python" -m pip freeze --exclude speech-tracking-jax | grep -v -E '^(pip|setuptools|wheel)=='; } > requirements.lock.new; \
	mv requirements.lock.new requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis

# JAX's persistent compilation cache of every command (speechkit/compilation.py): safe to
# delete at any time, the next run compiles again.
JAX_CACHE ?= $(or $(JAX_COMPILATION_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/speech-tracking-jax/jax)
clean-cache:
	rm -rf '$(JAX_CACHE)'
