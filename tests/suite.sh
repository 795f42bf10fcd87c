#!/usr/bin/env bash
# `make test`: the whole suite on 2 cores, as two lanes at once, then the Tansu pass.
#
# A single test seldom keeps both cores busy (a stack waits on its broker, its barrier, its model server;
# measured: 40-85% of the machine during the integration tests), so two lanes run side by side:
#
# - lane 1, the tests that kill processes or bound a recovery in wall time, one at a time: the fault
#   tests first (they need a saturated machine: lane 2 saturates it, so they run without their own
#   spinning CPU hog, SOCIETY_TEST_CPU_HOGS=0), the broker cluster, the LLM agents and their model
#   server, the dashboard, the outside clients, the fuzz; then two experiment tests that assert no timing
#   (they make the lanes about as long as each other); then the fuzz and outside-client tests and a
#   killed stream worker again on the other local broker, Tansu;
# - lane 2, the tests that assert no timing: the unit tests (on two processes, pytest-xdist), then the
#   report on every sample, the README test (make demo and every block of README.md in a copy of the
#   clone) and the other integration tests, one at a time.
#
# Each pytest session has its own temp folder, its own broker, its own stores. Lane 1's output goes to
# $LANE1_LOG and is shown when both lanes have ended; lane 2's is shown as it runs. Every step runs; the
# failures of all are listed at the end and make the exit status 1. (2026-11-28: CI took 66 min with the
# Tansu pass after both lanes, then 60 min with it in lane 1, lane 1 the longer by minutes; three tests
# went back to lane 2 after both lanes lost work.)
set -uo pipefail
cd "$(dirname "$0")/.."

PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider)
SLOW=(-o timeout=1200) # twice the single-test guard of pyproject.toml: two lanes share the cores
OUT=$(mktemp -d "${TMPDIR:-/tmp}/molt-society-tests.XXXXXX")
LANE1_LOG="$OUT/lane1.log"
I=tests/integration
LANE1=(
  "$I/test_faults.py" "$I/test_kafka_cluster.py" "$I/test_llm_agents.py" "$I/test_interview_llm.py"
  "$I/test_llm_pool.py" "$I/test_model_server_guard.py" "$I/test_superminds_judge.py"
  "$I/test_dashboard.py" "$I/test_security.py" "$I/test_scale.py" "$I/test_trim.py"
  "$I/test_apache_kafka.py" "$I/test_kafka_proxy.py" "$I/test_feed_reader_stuck.py"
  "$I/test_outside_clients.py" "$I/test_fuzz.py"
  "$I/test_experiment_effects.py" "$I/test_experiment_determinism.py" # no timing: they balance the lanes
)
FIRST=("$I/test_report.py" "$I/test_readme.py") # lane 2's longest, first
failed=()
stamp() { echo "$(date -u +%T) == $*"; }

# every integration module is in exactly one lane
lane2=()
for f in "$I"/test_*.py; do
  case " ${LANE1[*]} ${FIRST[*]} " in *" $f "*) ;; *) lane2+=("$f") ;; esac
done

stamp "lane 1 (faults, cluster, LLM, dashboard, clients, fuzz, then the Tansu pass; its log: $LANE1_LOG) beside lane 2"
(
  status=0
  SOCIETY_TEST_CPU_HOGS=0 "${PYTEST[@]}" "${SLOW[@]}" --basetemp="$OUT/lane1-tmp" --durations=30 \
    "${LANE1[@]}" || status=1
  stamp "lane 1: the fuzz and outside-client tests and a killed stream worker again, on Tansu"
  SOCIETY_BROKER=tansu "${PYTEST[@]}" --basetemp="$OUT/tansu-tmp" \
    "$I/test_fuzz.py" "$I/test_outside_clients.py" \
    "$I/test_faults.py::test_stream_worker_sigkill_is_restarted_and_nothing_is_lost_or_duplicated" ||
    status=$((status | 2))
  exit "$status"
) >"$LANE1_LOG" 2>&1 &
lane1_pid=$!

stamp "lane 2: the unit tests"
"${PYTEST[@]}" --basetemp="$OUT/unit-tmp" -n 2 --dist loadgroup --durations=10 tests/unit || failed+=("unit tests")
stamp "lane 2: the report on every sample, the README test, the other integration tests"
"${PYTEST[@]}" "${SLOW[@]}" --basetemp="$OUT/lane2-tmp" --durations=30 "${FIRST[@]}" "${lane2[@]}" ||
  failed+=("integration tests, lane 2")

stamp "waiting for lane 1"
wait "$lane1_pid"
lane1_status=$?
stamp "lane 1's output:"
cat "$LANE1_LOG"
((lane1_status & 1)) && failed+=("integration tests, lane 1")
((lane1_status & 2)) && failed+=("the Tansu pass")
((lane1_status > 3)) && failed+=("lane 1 (exit status $lane1_status)")

if ((${#failed[@]})); then
  printf '== FAILED: %s\n' "${failed[@]}"
  exit 1
fi
rm -rf "$OUT"
stamp "every step passed"
