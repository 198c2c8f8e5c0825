#!/usr/bin/env bash
# Fails when Git tracks a built binary (an ELF, Mach-O or PE executable, wherever it is) or a
# file over 5 MB outside a testdata folder: built binaries belong in bin/ and the caches,
# never in Git.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((5 * 1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
  [[ -f "$f" ]] || continue   # deleted in the work tree, not yet committed
  magic=$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    7f454c46 | cffaedfe | cefaedfe | feedface | feedfacf | 4d5a*)
      echo "tracked binary executable: $f" >&2; bad=1; continue ;;
  esac
  size=$(stat -c %s -- "$f")
  if (( size > limit )) && [[ "/$f" != */testdata/* ]]; then
    echo "tracked file over 5 MB outside testdata: $f ($size bytes)" >&2; bad=1
  fi
done < <(git ls-files -z)
if (( bad )); then
  echo "remove these from Git (git rm --cached) and let .gitignore keep them out" >&2
  exit 1
fi
