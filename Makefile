# The two set-up commands of the README: `make demo` and `make test`.
# Both create .venv on first use: torch==2.13.0 first (the CPU build; a bare `torch`
# would pull a multi-GB CUDA build), then this package with its dev extras.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
VAULT  := examples/vault
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install tools demo test test-backends test-wheel bench bench-quick lint format clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

# Third-party judges for the tests, in .venv/tools: Prometheus' promtool
# (scripts/promtool.sh) and the MCP Inspector (scripts/mcp_inspector.sh); each script
# returns at once when its tool is in place.
tools: install
	bash scripts/promtool.sh $(VENV)/tools
	bash scripts/mcp_inspector.sh $(VENV)/tools

demo: install
	bash scripts/demo.sh

test: install tools
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest

# The backend contract suite: ArcadeDB (local) always; Memgraph at the docker compose address
# unless VAULT_KO_TEST_MEMGRAPH_URL says otherwise; Neo4j when VAULT_KO_TEST_NEO4J_URL is set.
# The servers must be throwaway ones: the suite deletes their Note nodes.
test-backends: export VAULT_KO_TEST_MEMGRAPH_URL ?= bolt://127.0.0.1:$(or $(MEMGRAPH_BOLT_PORT),7687)
test-backends: install
	$(BIN)/pytest -p no:cacheprovider -rs tests/integration/graph/test_backend_contract.py

# pip install of the built wheel into a fresh venv outside the checkout, then graph up, sync,
# query (semantic) on a copy of the sample vault (CI runs it after `make test`).
test-wheel:
	PYTHON=$(PYTHON) bash scripts/wheel_smoke.sh

# The benchmarks (bench/run.py, BENCHMARKS.md). bench-quick is CI's smoke run (200 notes,
# 13,000 facts; a few minutes): every part runs and prints its row, so the code cannot rot.
# bench is the full run (20,000 notes, 1,000,000 facts; the first run also fills the
# embedding cache in ~/.cache/vault-ko-bench, which takes long with MiniLM on 2 CPUs).
bench-quick: install
	$(BIN)/python bench/run.py --quick
	$(BIN)/python bench/pg_ingest_phases.py --notes 200 --batches 10
	$(BIN)/python bench/onnx_forward.py --quick

bench: install
	$(BIN)/python bench/run.py

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VAULT)/.vault-ko .pytest_cache .ruff_cache
