// Command e2e-lanes runs the end-to-end suites in parallel lanes: it builds the manager and
// each suite's test binary once, lists the suites' tests, spreads them over the lanes by their
// recorded durations (longest first, each onto the lane that would finish first, counting a
// cluster's start-up for every suite a lane has not run yet), and runs the lanes at once. A
// lane runs each of its suites as one process with its own local cluster (the suite's
// TestMain starts it) on its own range of loopback ports, so lanes share nothing but the
// machine. It prints a line per suite process, the whole log of any that failed, and the
// tests' times; -record writes those times back to the durations file for the next plan.
//
// It is what `make e2e` runs (docs/testing.md, "The e2e lanes"); it must not decide whether a
// test passes: the exit status is that of the test processes.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// portBase is the first loopback port of lane 0; lane i uses [portBase+i*portSpan, +portSpan).
// Below the kernel's ephemeral range (32768 and up), so a port the kernel hands out to a
// client never lands in a lane's range.
const (
	portBase = 20000
	portSpan = 1000
)

// defaultDuration is what a test not in the durations file is expected to take, and startup
// what starting a suite's cluster and manager costs a lane.
const (
	defaultDuration = 60 * time.Second
	startup         = 25 * time.Second
)

type options struct {
	lanes     int
	pkgs      []string
	run       string
	timeout   string
	durations string
	record    bool
	out       string
	args      []string
}

func main() {
	var o options
	var pkgs string
	flag.IntVar(&o.lanes, "lanes", envInt("E2E_LANES", 4), "how many lanes run at once (E2E_LANES)")
	flag.StringVar(&pkgs, "pkgs", "./test/e2e/...", "the suites, as go list patterns separated by spaces")
	flag.StringVar(&o.run, "run", os.Getenv("E2E_RUN"), "run only the tests this regular expression matches (E2E_RUN)")
	flag.StringVar(&o.timeout, "timeout", "40m", "each suite process's -test.timeout")
	flag.StringVar(&o.durations, "durations", "test/e2e/durations.json", "the tests' recorded durations in seconds, by suite and test")
	flag.BoolVar(&o.record, "record", false, "write the measured durations back to -durations")
	flag.StringVar(&o.out, "out", "bin/e2e", "where the binaries and the lanes' logs go")
	flag.Parse()
	o.pkgs, o.args = strings.Fields(pkgs), flag.Args()
	if o.lanes < 1 {
		fmt.Fprintln(os.Stderr, "e2e-lanes: -lanes must be at least 1")
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-lanes:", err)
		os.Exit(1)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// suite is one e2e package: its import path, directory and test binary.
type suite struct {
	pkg, dir, bin string
}

// unit is one test of a suite, with what it is expected to take.
type unit struct {
	suite *suite
	test  string
	est   time.Duration
}

// job is one suite process of a lane: the tests of one suite the lane runs.
type job struct {
	suite *suite
	tests []string
	log   string

	took   time.Duration
	err    error
	passed map[string]time.Duration
}

func run(ctx context.Context, o options) error {
	start := time.Now()
	if err := os.MkdirAll(filepath.Join(o.out, "logs"), 0o755); err != nil {
		return err
	}
	suites, err := build(ctx, o)
	if err != nil {
		return err
	}
	recorded, err := readDurations(o.durations)
	if err != nil {
		return err
	}
	var units []unit
	var filter *regexp.Regexp
	if o.run != "" {
		if filter, err = regexp.Compile(o.run); err != nil {
			return fmt.Errorf("-run: %w", err)
		}
	}
	for _, s := range suites {
		tests, err := list(s)
		if err != nil {
			return err
		}
		for _, t := range tests {
			if filter != nil && !filter.MatchString(t) {
				continue
			}
			est := defaultDuration
			if d, ok := recorded[s.pkg][t]; ok {
				est = time.Duration(d * float64(time.Second))
			}
			units = append(units, unit{suite: s, test: t, est: est})
		}
	}
	if len(units) == 0 {
		return errors.New("no test matches")
	}
	lanes := plan(units, o.lanes)
	fmt.Fprintf(os.Stderr, "e2e-lanes: %d tests of %d suites in %d lanes (built in %s)\n", len(units), len(suites), len(lanes), time.Since(start).Round(time.Second))
	for i, l := range lanes {
		for _, j := range l {
			j.log = filepath.Join(o.out, "logs", fmt.Sprintf("lane%d-%s.log", i, filepath.Base(j.suite.dir)))
			fmt.Fprintf(os.Stderr, "  lane %d: %s %s\n", i, j.suite.pkg, strings.Join(j.tests, " "))
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, j := range l {
				runJob(ctx, o, i, j)
				mu.Lock()
				report(i, j)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	var failed []*job
	measured := map[string]map[string]float64{}
	for _, l := range lanes {
		for _, j := range l {
			if j.err != nil {
				failed = append(failed, j)
			}
			for t, d := range j.passed {
				if measured[j.suite.pkg] == nil {
					measured[j.suite.pkg] = map[string]float64{}
				}
				measured[j.suite.pkg][t] = d.Seconds()
			}
		}
	}
	printTimes(measured)
	if o.record {
		for pkg, ts := range measured {
			if recorded[pkg] == nil {
				recorded[pkg] = map[string]float64{}
			}
			maps.Copy(recorded[pkg], ts)
		}
		if err := writeDurations(o.durations, recorded); err != nil {
			return err
		}
	}
	for _, j := range failed {
		b, _ := os.ReadFile(j.log)
		fmt.Fprintf(os.Stderr, "\n=== %s (%s) failed: %v; its log, %s:\n%s\n", j.suite.pkg, strings.Join(j.tests, " "), j.err, j.log, b)
	}
	fmt.Fprintf(os.Stderr, "e2e-lanes: %d suite processes, %d failed, %s\n", countJobs(lanes), len(failed), time.Since(start).Round(time.Second))
	if len(failed) > 0 {
		return fmt.Errorf("%d suite processes failed", len(failed))
	}
	return nil
}

// build builds the manager once (the suites use it instead of building their own) and each
// suite's test binary.
func build(ctx context.Context, o options) ([]*suite, error) {
	manager, err := filepath.Abs(filepath.Join(o.out, "karpenter"))
	if err != nil {
		return nil, err
	}
	if err := command(ctx, "", "go", "build", "-o", manager, "./cmd/karpenter").Run(); err != nil {
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	if err := os.Setenv("KARPENTER_E2E_MANAGER", manager); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	ls := command(ctx, "", "go", append([]string{"list", "-f", "{{.ImportPath}} {{.Dir}} {{len .TestGoFiles}}"}, o.pkgs...)...)
	ls.Stdout = &out
	if err := ls.Run(); err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(o.pkgs, " "), err)
	}
	var suites []*suite
	for line := range strings.Lines(out.String()) {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] == "0" {
			continue
		}
		bin, err := filepath.Abs(filepath.Join(o.out, strings.ReplaceAll(filepath.Base(f[1]), ".", "_")+".test"))
		if err != nil {
			return nil, err
		}
		if err := command(ctx, "", "go", "test", "-c", "-o", bin, f[0]).Run(); err != nil {
			return nil, fmt.Errorf("building %s: %w", f[0], err)
		}
		suites = append(suites, &suite{pkg: f[0], dir: f[1], bin: bin})
	}
	return suites, nil
}

func command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir, c.Stdout, c.Stderr = dir, os.Stderr, os.Stderr
	return c
}

// testFunc is a top-level test's declaration.
var testFunc = regexp.MustCompile(`(?m)^func (Test[A-Z_0-9]\w*)\(\w+ \*testing\.T\)`)

// list is the suite's top-level tests, read from its test files: the test binary's -test.list
// would run the suite's TestMain, which starts a cluster.
func list(s *suite) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(s.dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var tests []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			tests = append(tests, string(m[1]))
		}
	}
	sort.Strings(tests)
	return tests, nil
}

// plan spreads the units over n lanes, longest first, each onto the lane that would end
// earliest with it (a suite new to the lane costs a start-up too); a lane's units of one
// suite make one job.
func plan(units []unit, n int) [][]*job {
	sort.SliceStable(units, func(i, j int) bool {
		if units[i].est != units[j].est {
			return units[i].est > units[j].est
		}
		return units[i].suite.pkg+units[i].test < units[j].suite.pkg+units[j].test
	})
	load := make([]time.Duration, n)
	lanes := make([][]*job, n)
	jobOf := func(lane int, s *suite) *job {
		for _, j := range lanes[lane] {
			if j.suite == s {
				return j
			}
		}
		return nil
	}
	for _, u := range units {
		best, bestEnd := -1, time.Duration(0)
		for l := range n {
			end := load[l] + u.est
			if jobOf(l, u.suite) == nil {
				end += startup
			}
			if best < 0 || end < bestEnd {
				best, bestEnd = l, end
			}
		}
		j := jobOf(best, u.suite)
		if j == nil {
			j = &job{suite: u.suite}
			lanes[best] = append(lanes[best], j)
		}
		j.tests = append(j.tests, u.test)
		load[best] = bestEnd
	}
	var out [][]*job
	for _, l := range lanes {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

var passLine = regexp.MustCompile(`^--- (PASS|SKIP): (\S+) \(([0-9.]+)s\)`)

// runJob runs one suite process on the lane's ports and reads its tests' times.
func runJob(ctx context.Context, o options, lane int, j *job) {
	start := time.Now()
	f, err := os.Create(j.log)
	if err != nil {
		j.err = err
		return
	}
	defer f.Close()
	quoted := make([]string, len(j.tests))
	for i, t := range j.tests {
		quoted[i] = regexp.QuoteMeta(t)
	}
	args := append([]string{"-test.v", "-test.count=1", "-test.timeout", o.timeout,
		"-test.run", "^(" + strings.Join(quoted, "|") + ")$"}, o.args...)
	c := exec.CommandContext(ctx, j.suite.bin, args...)
	c.Dir, c.Stdout, c.Stderr = j.suite.dir, f, f
	c.Env = append(os.Environ(), "KARPENTER_E2E_PORT_BASE="+strconv.Itoa(portBase+lane*portSpan), "KARPENTER_E2E_PORT_SPAN="+strconv.Itoa(portSpan))
	j.err = c.Run()
	j.took = time.Since(start)
	j.passed = map[string]time.Duration{}
	if _, err := f.Seek(0, 0); err != nil {
		return
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := passLine.FindStringSubmatch(sc.Text()); m != nil && m[1] == "PASS" {
			if s, err := strconv.ParseFloat(m[3], 64); err == nil {
				j.passed[m[2]] = time.Duration(s * float64(time.Second))
			}
		}
	}
}

func report(lane int, j *job) {
	status := "ok  "
	if j.err != nil {
		status = "FAIL"
	}
	fmt.Fprintf(os.Stderr, "%s lane %d %s %s (%d tests) %s\n", status, lane, j.suite.pkg, j.took.Round(time.Second), len(j.tests), j.log)
}

func countJobs(lanes [][]*job) int {
	n := 0
	for _, l := range lanes {
		n += len(l)
	}
	return n
}

func printTimes(measured map[string]map[string]float64) {
	type row struct {
		name string
		s    float64
	}
	var rows []row
	for pkg, ts := range measured {
		for t, s := range ts {
			rows = append(rows, row{filepath.Base(pkg) + "." + t, s})
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.s != b.s {
			if a.s > b.s {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	fmt.Fprintln(os.Stderr, "e2e-lanes: the tests' times, longest first")
	for _, r := range rows {
		fmt.Fprintf(os.Stderr, "  %7.1fs %s\n", r.s, r.name)
	}
}

func readDurations(path string) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func writeDurations(path string, d map[string]map[string]float64) error {
	for _, ts := range d {
		for t, s := range ts {
			ts[t] = float64(int(s*10+0.5)) / 10
		}
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
