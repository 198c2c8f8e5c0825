#!/usr/bin/env bash
# Fails when regenerating code or manifests, tidying go.mod or gofmt would change the tree, when
# Git tracks a built binary or a large file, when a hand-written Go file passes 800 lines, or
# when golangci-lint (with the dependency rules of docs/architecture.md) finds something.
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
# hack/tools/argocd needs Go 1.27 (ArgoCD v3.6) and hack/tools/upstream-e2e Go 1.26.9
# (upstream Karpenter v1.15), each fetched as a toolchain for that module alone.
for m in hack/tools/*/; do
  case $m in
    */argocd/) (cd "$m" && GOTOOLCHAIN=go1.27.3 go mod tidy) ;;
    */upstream-e2e/) (cd "$m" && GOTOOLCHAIN=go1.26.9 go mod tidy) ;;
    *) (cd "$m" && go mod tidy) ;;
  esac
done
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
hack/verify-tracked.sh
long=$(git ls-files --cached --others --exclude-standard '*.go' | grep -v 'zz_generated' | xargs wc -l | awk '$2 != "total" && $1 > 800 {print $2 " (" $1 " lines)"}')
if [[ -n "$long" ]]; then
  echo "hand-written Go files over 800 lines; split them by concern:" >&2; echo "$long" >&2; exit 1
fi
go tool -modfile=hack/tools/golangci/go.mod golangci-lint run ./...
echo "verify: generated code, manifests and go.mod up to date; no binaries; lint clean" >&2
