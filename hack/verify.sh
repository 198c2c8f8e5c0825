#!/usr/bin/env bash
# Fails when regenerating code or manifests, tidying go.mod or gofmt would change the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory generate manifests
go mod tidy
for m in hack/tools/*/; do (cd "$m" && go mod tidy); done
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
changes=$(git status --porcelain -- api charts config go.mod go.sum hack)
if [[ -n "$changes" ]]; then
  echo "generated files are out of date; run 'make generate manifests' and 'go mod tidy', then commit:" >&2
  echo "$changes" >&2
  git --no-pager diff --stat >&2
  exit 1
fi
echo "verify: generated code, manifests and go.mod are up to date" >&2
