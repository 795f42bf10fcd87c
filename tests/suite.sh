#!/usr/bin/env bash
# `make test`: the whole suite, in three phases, on 2 cores in about two thirds of the serial time.
#
# 1. Two lanes at once. The README test (make demo and every block of README.md in a copy of the clone: its
#    own store, its own local broker, the documented dashboard port or a free one) beside the unit tests
#    (on two processes, pytest-xdist) and then the report on every sample (chDB and the embedding model).
#    Neither lane asserts a timing, and they share nothing: their pytest temp folders, stores and brokers
#    are their own. The README lane's output is shown when it ends (it is in $README_LOG meanwhile).
# 2. The other integration tests, one at a time: each runs a stack, several kill processes under a
#    spinning CPU hog, and two at once would share the cores they measure recovery on.
# 3. The fuzz and outside-client tests and a killed stream worker again on the other local broker, Tansu.
#
# Exit status: non-zero when any phase failed (every phase runs, so one report shows every failure).
set -uo pipefail
cd "$(dirname "$0")/.."

PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider)
OUT=$(mktemp -d "${TMPDIR:-/tmp}/molt-society-tests.XXXXXX")
README_LOG="$OUT/readme.log"
failed=()

echo "$(date -u +%T) == phase 1: the README test (log: $README_LOG) beside the unit tests, then the report on every sample"
"${PYTEST[@]}" --basetemp="$OUT/readme-tmp" --durations=10 tests/integration/test_readme.py \
  >"$README_LOG" 2>&1 &
readme_pid=$!

"${PYTEST[@]}" --basetemp="$OUT/unit-tmp" -n 2 --durations=10 tests/unit || failed+=("unit tests")
"${PYTEST[@]}" --basetemp="$OUT/report-tmp" --durations=10 tests/integration/test_report.py ||
  failed+=("tests/integration/test_report.py")

echo "$(date -u +%T) == waiting for the README test"
wait "$readme_pid" || failed+=("tests/integration/test_readme.py")
cat "$README_LOG"

echo "$(date -u +%T) == phase 2: the other integration tests, one at a time"
"${PYTEST[@]}" --basetemp="$OUT/integration-tmp" --durations=40 tests/integration \
  --ignore=tests/integration/test_readme.py --ignore=tests/integration/test_report.py ||
  failed+=("the other integration tests")

echo "$(date -u +%T) == phase 3: the fuzz and outside-client tests and a killed stream worker again, on Tansu"
SOCIETY_BROKER=tansu "${PYTEST[@]}" --basetemp="$OUT/tansu-tmp" \
  tests/integration/test_fuzz.py tests/integration/test_outside_clients.py \
  tests/integration/test_faults.py::test_stream_worker_sigkill_is_restarted_and_nothing_is_lost_or_duplicated ||
  failed+=("the Tansu pass")

if ((${#failed[@]})); then
  printf '== FAILED: %s\n' "${failed[@]}"
  exit 1
fi
rm -rf "$OUT"
echo "$(date -u +%T) == every phase passed"
