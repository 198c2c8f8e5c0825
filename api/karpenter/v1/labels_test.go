package v1

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCRDRulesListTheWellKnownLabels keeps the CEL rules that restrict the karpenter.k8s.aws
// and karpenter.sh label domains (markers in nodepool_types.go and nodeclaim_types.go) in
// step with WellKnownLabels, which the webhook uses: every rule must allow every well-known
// label of its domain, and no other label of it.
func TestCRDRulesListTheWellKnownLabels(t *testing.T) {
	quoted := regexp.MustCompile(`'([a-z0-9.-]+/[a-z0-9.-]+)'`)
	for _, file := range []string{"nodepool_types.go", "nodeclaim_types.go"} {
		src, err := os.ReadFile(filepath.Join(".", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, domain := range []string{AWSGroup, Group} {
			marker := `label domain \"` + domain + `\" is restricted"`
			var rules []string
			for line := range strings.Lines(string(src)) {
				if strings.Contains(line, marker) {
					rules = append(rules, line)
				}
			}
			if len(rules) == 0 {
				t.Fatalf("%s: no rule restricting %s", file, domain)
			}
			for _, rule := range rules {
				allowed := map[string]bool{}
				for _, m := range quoted.FindAllStringSubmatch(rule, -1) {
					allowed[m[1]] = true
				}
				for label := range WellKnownLabels {
					if strings.HasPrefix(label, domain+"/") && !allowed[label] {
						t.Errorf("%s: the rule for %s does not allow the well-known %s", file, domain, label)
					}
				}
				for label := range allowed {
					if strings.HasPrefix(label, domain+"/") && !WellKnownLabels.Has(label) {
						t.Errorf("%s: the rule for %s allows %s, which is not well known", file, domain, label)
					}
				}
			}
		}
	}
}
