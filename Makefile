# Every target does its own setup: `make demo` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.DEFAULT_GOAL := help
.PHONY: help setup compiler kafka browser kcat demo demo-llm test test-unit test-integration lint bench clean

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-18s %s\n", $$1, $$2}'

# llama-cpp-python builds ggml for the build machine's CPU by default; on CPUs that report AMX its AMX
# path dies with a general protection fault on the first completion (seen on these machines with 0.3.36),
# so it is built for AVX2 without AMX, from source and not from pip's cache (a cached wheel may be native).
# Its multimodal library (LLAVA_BUILD: mtmd, loaded only by image chat handlers) is left out: a minute of
# the build (6:23 -> 5:29 on 2 cores).
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory compiler
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet --no-cache-dir "llama-cpp-python[server]>=0.3.2"
	$(BIN)/pip install --quiet -e ".[dev,llm]"
	@touch $(STAMP)

setup: $(STAMP) kafka ## Create .venv and install the project with its dev tools; fetch Apache Kafka

kafka: $(STAMP) ## Fetch the pinned Apache Kafka from Maven Central into ~/.cache/molt-society (once; SOCIETY_BROKER=kafka)
	@$(BIN)/python -m molt_society.runtime.apache_kafka fetch

compiler: ## Install a C++ compiler and cmake with apt when missing (llama-cpp-python builds from source)
	@{ command -v g++ >/dev/null 2>&1 && command -v cmake >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; \
	  else echo "g++ or cmake is missing and cannot be installed without root: apt-get install g++ cmake"; exit 1; fi; \
	  echo "installing g++ and cmake with apt ..."; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ cmake >/dev/null; }

browser: ## Install Debian's chromium (dashboard tests) with apt when it is missing; needs root or sudo
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; \
	  else echo "chromium is missing and cannot be installed without root: apt-get install chromium"; exit 1; fi; \
	  echo "installing chromium with apt ..."; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@chromium --version

kcat: ## Install Debian's kcat (tests of outside Kafka clients, docs/kafka-clients.md) with apt when it is missing
	@command -v kcat >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; \
	  else echo "kcat is missing and cannot be installed without root: apt-get install kcat"; exit 1; fi; \
	  echo "installing kcat with apt ..."; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; }
	@kcat -V | grep -m1 Version

demo: $(STAMP) kafka ## Run 2,000 agents for 1,000 ticks of 5 simulated minutes (3.5 days, about a minute), query it, write its report
	$(BIN)/society run --society demo --replace --agents 2000 --ticks 1000 --tick-seconds 300
	@echo; echo "== Example queries (society sql \"...\")"
	$(BIN)/society sql \
	  "SELECT type, count() AS events, uniqExact(actor) AS agents FROM events WHERE society = 'demo' GROUP BY type ORDER BY events DESC"
	$(BIN)/society sql \
	  "SELECT max_depth AS depth, count() AS posts, round(100 * count() / sum(count()) OVER (), 2) AS pct FROM threads WHERE society = 'demo' GROUP BY depth ORDER BY depth"
	$(BIN)/society sql \
	  "SELECT window_start, dim, round(value, 3) AS value FROM metrics FINAL WHERE society = 'demo' AND metric IN ('thread_comments_powerlaw') AND dim IN ('alpha', 'xmin') ORDER BY window_start DESC, dim LIMIT 6"
	$(BIN)/society sql \
	  "SELECT window_start, metric, dim, round(value, 3) AS value FROM metrics FINAL WHERE society = 'demo' AND metric IN ('pagerank_top_share', 'topk_churn', 'share_no_comment') ORDER BY window_start DESC, metric, dim LIMIT 10"
	@echo; echo "== The MoltBook studies' diagnostics of this society (society report)"
	$(BIN)/society report demo --out .society/demo-report.html


demo-llm: $(STAMP) ## A society of 200 agents, 8 of them LLM agents on the local SmolLM2 server; what it cost
	$(BIN)/society run --society demo_llm --replace \
	  --agents 200 --llm-agents 8 --llm-models smollm2-135m,smollm2-135m-hot --ticks 12 --no-dashboard
	@echo; echo "== What the model calls cost (society sql over the model_calls view)"
	$(BIN)/society sql \
	  "SELECT model, count() AS calls, countIf(outcome != 'ok') AS failed_calls, sum(prompt_tokens) AS prompt, sum(completion_tokens) AS completion, round(quantile(0.5)(latency_ms)) AS p50_ms FROM model_calls WHERE society = 'demo_llm' GROUP BY model"
	$(BIN)/society sql \
	  "SELECT decision, count() AS calls, any(reason) AS a_reason FROM model_calls WHERE society = 'demo_llm' GROUP BY decision ORDER BY calls DESC"

test: $(STAMP) kafka browser kcat ## Run the whole test suite (unit + integration on the real brokers, chDB, Chromium, kcat)
	tests/suite.sh

test-unit: $(STAMP) ## Unit tests only
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup tests/unit

test-integration: $(STAMP) kafka browser kcat ## Integration tests only (real brokers, chDB, Chromium, kcat), one at a time
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=40 tests/integration

lint: $(STAMP) ## ruff, mypy --strict and the layer contracts (imports point down, no cycles)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

bench: $(STAMP) browser ## Pipeline rates, dashboard, full report at 1M events and on the real crawl, LLM agents tokens/s and decisions/s (bench.*)
	$(BIN)/python -m molt_society.bench.pipeline
	$(BIN)/python -m molt_society.bench.dashboard
	$(BIN)/python -m molt_society.bench.report
	$(BIN)/python -m molt_society.bench.crawl_report
	$(BIN)/python -m molt_society.bench.embeddings
	$(BIN)/python -m molt_society.bench.archive
	$(BIN)/python -m molt_society.bench.cold_threads
	$(BIN)/python -m molt_society.bench.llm
	$(BIN)/python -m molt_society.bench.llm_rate
	$(BIN)/python -m molt_society.bench.startup
	$(BIN)/python -m molt_society.bench.experiment
	$(BIN)/python -m molt_society.bench.fit
	$(BIN)/python -m molt_society.bench.consume_loop
	$(BIN)/python -m molt_society.bench.brokers
	$(BIN)/python -m molt_society.bench.tail_gaps
	$(BIN)/python -m molt_society.bench.aging
	$(BIN)/python -m molt_society.bench.tick_hops
	$(BIN)/python -m molt_society.bench.kafka_requests

clean: ## Remove the virtualenv and local state
	rm -rf $(VENV) .society .mypy_cache .ruff_cache
