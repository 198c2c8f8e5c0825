#!/usr/bin/env bash
# Runs Go fuzz targets one after the other. Usage: hack/fuzz.sh BUDGET pkg:Target[:count] ...
#
# BUDGET is a duration (5m) for long runs, or "count" to run each target for its own number of
# executions (the third field, e.g. 400x). make test uses counts: a duration races Go's fuzz
# coordinator (golang/go#75804, fixed in Go 1.27, not in the 1.26 toolchain this module builds
# with), which can fail a target with a bare "context deadline exceeded" at the end of its time
# although no input failed. A count has no deadline to race.
#
# For duration runs, that one failure is reported as a warning when the run wrote no failing
# input under testdata/fuzz; any other failure, or a new failing input, fails the run.
# FUZZ_PARALLEL is the number of fuzzing workers (default 2, the reference machine's cores).
set -uo pipefail
budget=$1; shift
for t in "$@"; do
  IFS=: read -r pkg name count <<<"$t"
  fuzztime=$budget
  if [[ $budget == count ]]; then fuzztime=${count:?"$t has no execution count"}; fi
  echo "fuzzing $name ($pkg) for $fuzztime"
  corpus="$pkg/testdata/fuzz/$name"
  before=$(ls "$corpus" 2>/dev/null | sort)
  log=$(mktemp)
  go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -parallel "${FUZZ_PARALLEL:-2}" "$pkg" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  after=$(ls "$corpus" 2>/dev/null | sort)
  if [[ $rc -ne 0 ]]; then
    reasons=$(grep -A1 -E '^--- FAIL: ' "$log" | grep -vE '^(--- FAIL: |--$)' | sed 's/^[[:space:]]*//' | sort -u)
    if [[ $budget != count && $before == "$after" && $reasons == "context deadline exceeded" ]]; then
      echo "warning: $name ended with Go's fuzztime race (golang/go#75804) and wrote no failing input; not a failure" >&2
    else
      rm -f "$log"
      exit "$rc"
    fi
  fi
  rm -f "$log"
done
