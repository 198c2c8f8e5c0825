// Command e2e-report reads the JSON reports Ginkgo wrote for upstream's suites and prints one
// line per spec (PASS, FAIL or SKIP, the suite, the spec's full text, its run time, and for a
// failure where and why, for a skip why) and a last line `N passed, M failed, K skipped`. A
// spec skipped by hack/tools/upstream-e2e/skip.txt is printed with the reason written there.
// It exits 1 when a spec failed or a report is missing, so `make upstream-e2e` fails with it.
// It only reads reports; it never runs a suite.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// skipRule is one line of skip.txt: a regular expression on a spec's full text and the reason
// the spec cannot apply here.
type skipRule struct {
	re     *regexp.Regexp
	reason string
}

func main() {
	skipFile := flag.String("skip", "", "skip.txt: lines `<regexp> | <reason>`; # starts a comment")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: e2e-report [-skip skip.txt] report.json...")
		os.Exit(2)
	}
	rules, err := readSkips(*skipFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var passed, failed, skipped int
	missing := false
	for _, path := range flag.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v (did the suite start?)\n", path, err)
			missing = true
			continue
		}
		var reports []types.Report
		if err := json.Unmarshal(data, &reports); err != nil {
			fmt.Fprintf(os.Stderr, "%s: not a Ginkgo JSON report: %v\n", path, err)
			missing = true
			continue
		}
		for _, r := range reports {
			for _, s := range r.SpecReports {
				if s.LeafNodeType != types.NodeTypeIt {
					if s.State.Is(types.SpecStateFailureStates) {
						fmt.Printf("FAIL  %s: %s %s: %s\n", r.SuiteDescription, s.LeafNodeType, s.Failure.Location, oneLine(s.Failure.Message))
						failed++
					}
					continue
				}
				text := s.FullText()
				switch {
				case s.State == types.SpecStatePassed:
					passed++
					fmt.Printf("PASS  %s: %s (%s)\n", r.SuiteDescription, text, s.RunTime.Round(time.Second))
				case s.State.Is(types.SpecStateFailureStates):
					failed++
					fmt.Printf("FAIL  %s: %s (%s) at %s: %s\n", r.SuiteDescription, text, s.RunTime.Round(time.Second), s.Failure.Location, oneLine(s.Failure.Message))
				default:
					skipped++
					fmt.Printf("SKIP  %s: %s (%s)\n", r.SuiteDescription, text, skipReason(rules, text, s.State))
				}
			}
		}
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || missing {
		os.Exit(1)
	}
}

// readSkips parses skip.txt; a line that is not `<regexp> | <reason>` is an error naming it.
func readSkips(path string) ([]skipRule, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rules []skipRule
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		expr, reason, ok := strings.Cut(line, " | ")
		if !ok || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: want `<regexp> | <reason>`", path, n)
		}
		re, err := regexp.Compile(strings.TrimSpace(expr))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		rules = append(rules, skipRule{re: re, reason: strings.TrimSpace(reason)})
	}
	return rules, sc.Err()
}

func skipReason(rules []skipRule, text string, state types.SpecState) string {
	for _, r := range rules {
		if r.re.MatchString(text) {
			return r.reason
		}
	}
	if state == types.SpecStatePending {
		return "pending upstream"
	}
	return "not run: " + state.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
