#!/usr/bin/env bash
# The policy engine's benchmark target (issue: within 10% of the solve without policies),
# measured as interleaved pairs so that the machine's drift hits both sides alike:
#
#   hack/bench-policy.sh [PAIRS]      (default 10)
#
# prints each pair in ms and the medians of both sides and of the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-10}
bin=$(mktemp -d)/policy.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./scheduling/planner
cd scheduling/planner
ms() { "$bin" -test.run='^$' -test.bench="$1" -test.benchtime=4x | awk '/^Benchmark/ {print $3 / 1e6}'; }
for _ in $(seq "$pairs"); do
  echo "$(ms 'Mixed5000With20NamespacesNoPolicies$') $(ms 'Mixed5000With20NamespacesPolicies$')"
done | awk '
  { plain[NR] = $1; pol[NR] = $2; ratio[NR] = $2 / $1; printf "without %7.1f ms   with %7.1f ms   ratio %.3f\n", $1, $2, $2 / $1 }
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END { n = NR; printf "median: without %.1f ms, with %.1f ms, ratio %.3f\n", median(plain, n), median(pol, n), median(ratio, n) }'
