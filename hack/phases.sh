#!/usr/bin/env bash
# Runs make targets in order and prints how long each took, so a slow CI run shows where its
# time went. Stops at the first failure.
set -uo pipefail
declare -a names secs
total=$SECONDS
for phase in "$@"; do
  echo "=== phase $phase" >&2
  start=$SECONDS
  if ! make --no-print-directory "$phase"; then
    echo "=== phase $phase FAILED after $((SECONDS - start))s" >&2
    exit 1
  fi
  names+=("$phase"); secs+=($((SECONDS - start)))
done
echo "=== timings" >&2
for i in "${!names[@]}"; do printf '  %-10s %5ss\n' "${names[$i]}" "${secs[$i]}" >&2; done
printf '  %-10s %5ss\n' total "$((SECONDS - total))" >&2
