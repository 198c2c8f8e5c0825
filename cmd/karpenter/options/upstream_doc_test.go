package options

import (
	"flag"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docs/upstream.md's tables of settings and feature gates say what the manager registers.
func TestUpstreamDocMatchesTheFlags(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/upstream.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	(&Options{}).AddFlags(fs)
	setting := regexp.MustCompile("^\\| `([A-Z_]+)` \\| `--([a-z-]+)` \\|")
	gate := regexp.MustCompile("^\\| `([A-Za-z]+)` \\| (true|false) \\| \\**(true|false)\\** \\|")
	settings, gates := 0, map[string]bool{}
	for i, line := range strings.Split(string(doc), "\n") {
		if m := setting.FindStringSubmatch(line); m != nil {
			settings++
			if fs.Lookup(m[2]) == nil {
				t.Errorf("docs/upstream.md:%d: --%s is not a flag of the manager", i+1, m[2])
			}
			if envName(m[2]) != m[1] {
				t.Errorf("docs/upstream.md:%d: --%s reads %s, not %s", i+1, m[2], envName(m[2]), m[1])
			}
		}
		if m := gate.FindStringSubmatch(line); m != nil {
			gates[m[1]] = true
			found := false
			for _, g := range Gates {
				if g.Name == m[1] {
					found = true
					if m[2] != strconv.FormatBool(g.Upstream) || m[3] != strconv.FormatBool(g.Default) {
						t.Errorf("docs/upstream.md:%d: %s defaults to %t here and %t upstream", i+1, g.Name, g.Default, g.Upstream)
					}
					if built := !strings.Contains(line, "not built"); built != g.Built {
						t.Errorf("docs/upstream.md:%d: %s is built: %t", i+1, g.Name, g.Built)
					}
				}
			}
			if !found {
				t.Errorf("docs/upstream.md:%d: %s is not a known gate", i+1, m[1])
			}
		}
	}
	if settings < 30 {
		t.Errorf("docs/upstream.md lists %d settings; the table was not read", settings)
	}
	for _, g := range Gates {
		if !gates[g.Name] {
			t.Errorf("docs/upstream.md does not list the gate %s", g.Name)
		}
	}
	if !strings.Contains(string(doc), UpstreamFeatureGates()) {
		t.Errorf("docs/upstream.md does not quote upstream's default FEATURE_GATES, %s", UpstreamFeatureGates())
	}
}
