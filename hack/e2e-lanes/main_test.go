package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The plan puts every test in exactly one lane, longest first onto the lane that ends
// first, counts a cluster start for each suite a lane runs, and keeps a lane's tests of one
// suite in one process.
func TestPlanSpreadsTestsOverLanes(t *testing.T) {
	e2e, chaos := &suite{pkg: "e2e"}, &suite{pkg: "chaos"}
	s := time.Second
	units := []unit{
		{e2e, "TestA", 300 * s}, {chaos, "TestChaos", 340 * s}, {e2e, "TestB", 160 * s}, {e2e, "TestC", 140 * s},
		{e2e, "TestD", 100 * s}, {chaos, "TestFailover", 80 * s}, {e2e, "TestE", 10 * s}, {e2e, "TestF", 10 * s},
	}
	lanes := plan(slices.Clone(units), 3)
	if len(lanes) != 3 {
		t.Fatalf("%d lanes, want 3", len(lanes))
	}
	seen := map[string]int{}
	var ends []time.Duration
	for _, l := range lanes {
		var end time.Duration
		suites := map[*suite]bool{}
		for _, j := range l {
			if suites[j.suite] {
				t.Errorf("a lane runs suite %s in two processes", j.suite.pkg)
			}
			suites[j.suite] = true
			end += startup
			for _, name := range j.tests {
				seen[j.suite.pkg+"."+name]++
				for _, u := range units {
					if u.suite == j.suite && u.test == name {
						end += u.est
					}
				}
			}
		}
		ends = append(ends, end)
	}
	for _, u := range units {
		if seen[u.suite.pkg+"."+u.test] != 1 {
			t.Errorf("%s.%s planned %d times", u.suite.pkg, u.test, seen[u.suite.pkg+"."+u.test])
		}
	}
	// The longest lane is within the longest test (and a start-up) of the shortest: the
	// greedy plan's bound.
	if slices.Max(ends)-slices.Min(ends) > 340*s+startup {
		t.Errorf("lanes end at %v: unbalanced", ends)
	}
	// More lanes than tests: no empty lane is run.
	if got := plan(units[:2], 4); len(got) != 2 {
		t.Errorf("2 tests over 4 lanes: %d lanes", len(got))
	}
}

// The tests are read from the suite's test files: top-level func TestX(t *testing.T), not
// TestMain, helpers or methods.
func TestListReadsTheSuitesTests(t *testing.T) {
	dir := t.TempDir()
	src := "package e2e\n\nfunc TestMain(m *testing.M) {}\n\nfunc TestScaleUp(t *testing.T) {}\n\nfunc TestSoak(tt *testing.T) {\n}\n\nfunc helper(t *testing.T) {}\n\nfunc (s *x) TestNot(t *testing.T) {}\n\n// func TestCommented(t *testing.T) {}\n"
	if err := os.WriteFile(filepath.Join(dir, "a_test.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.go"), []byte("package e2e\n\nfunc TestInCode(t *testing.T) {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := list(&suite{dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"TestScaleUp", "TestSoak"}; !slices.Equal(got, want) {
		t.Errorf("tests %v, want %v", got, want)
	}
}
