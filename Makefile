# Two commands do all set-up on a fresh machine:
#   make demo   - a zero-cost W-PCA search on the embedded defaults (SQLite, bundled WikiText-2)
#   make test   - the test suite
# Both create .venv when missing and install torch==2.13.0 (CPU) first, so no CUDA build is pulled.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

FLOORS := .venv-floors

.PHONY: demo test floors install clean system-deps wheel-check

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/optuna-wpca search --preset wpca-tiny \
		--storage sqlite:///optuna_wpca.db --study-name demo-wpca-tiny \
		--n-trials 100 --population-size 20 --batch-size 32 --seq-len 64 --artifact-dir optuna_wpca_artifacts

# PostgreSQL and chromium for the suite: installed when missing (as root), else one line says how.
system-deps:
	@bash scripts/system-deps.sh

test: $(STAMP) system-deps
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q

# The declared lowest versions (.ci/floors.txt) installed together, and the tests that touch them.
floors:
	test -x $(FLOORS)/bin/python || $(PYTHON) -m venv $(FLOORS)
	$(FLOORS)/bin/python -m pip install --quiet --upgrade pip
	$(FLOORS)/bin/python -m pip install --quiet torch==2.13.0
	$(FLOORS)/bin/python -m pip install --quiet -e '.[dev]' -c .ci/floors.txt
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(FLOORS)/bin/python -m pytest -q -p no:cacheprovider \
		tests/test_study.py tests/test_objective.py tests/test_sampler.py tests/test_transformers.py \
		tests/test_dashboard.py tests/test_storage.py tests/test_text.py tests/test_models.py \
		tests/test_cli.py tests/test_distill.py tests/test_optuna_private.py tests/test_pick.py hub

# The package as released: the wheel built and checked (twine), installed with the CPU torch wheel in a
# fresh virtual environment outside the repository, and a search run from there.
WHEEL_VENV ?= /tmp/optuna-wpca-wheel-venv
wheel-check: $(STAMP)
	rm -rf dist $(WHEEL_VENV)
	$(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir dist .
	$(BIN)/python -m twine check --strict dist/*.whl
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(WHEEL_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(WHEEL_VENV)/bin/python -m pip install --quiet dist/*.whl
	cd $(WHEEL_VENV) && HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 ./bin/optuna-wpca search --preset wpca-tiny \
		--storage sqlite:///wheel.db --study-name wheel --n-trials 6 --population-size 3 --batch-size 8 \
		--seq-len 64 --reference-size 4 --quiet --top 1
	cd $(WHEEL_VENV) && ./bin/optuna-wpca show --storage sqlite:///wheel.db --study-name wheel --top 1
	cd $(WHEEL_VENV) && ./bin/python -c "import optuna_wpca, importlib.metadata as m; \
		assert optuna_wpca.__version__ == m.version('optuna-wpca'), 'version mismatch'; \
		print('installed', m.version('optuna-wpca'), 'from', optuna_wpca.__file__)"

clean:
	rm -rf $(VENV) $(FLOORS) *.egg-info optuna_wpca.db optuna_wpca_artifacts dist
