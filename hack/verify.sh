#!/usr/bin/env bash
# Fails when regenerating code or manifests, tidying go.mod or gofmt would change the tree.
# It compares the tree before and after regenerating, so it also works with uncommitted edits
# (in CI, on a clean clone, "before" is the commit).
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(api charts config go.mod go.sum hack)
snapshot() {
  { git diff --binary -- "${paths[@]}"
    git ls-files -z --others --exclude-standard -- "${paths[@]}" | xargs -0 -r sha256sum
  } | sha256sum
}
before=$(snapshot)
make --no-print-directory generate manifests
go mod tidy
for m in hack/tools/*/; do (cd "$m" && go mod tidy); done
after=$(snapshot)
unformatted=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
if [[ "$before" != "$after" ]]; then
  echo "generated files were out of date and have been regenerated; review and commit:" >&2
  git status --short -- "${paths[@]}" >&2
  exit 1
fi
echo "verify: generated code, manifests and go.mod are up to date" >&2
