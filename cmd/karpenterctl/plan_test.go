package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const planNow = "2026-11-16T12:00:00Z"

// planSides writes a base (test/policies' NodePool and policies) and a head whose team-a
// budget is halved, under dir/base and dir/head.
func planSides(t *testing.T, dir string, edit func(policies string) string) (base, head string) {
	t.Helper()
	src := filepath.Join(repo, "test", "policies")
	base, head = filepath.Join(dir, "base"), filepath.Join(dir, "head")
	for _, d := range []string{base, head} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"nodepools.yaml", "policies.yaml"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			if d == head && edit != nil {
				text = edit(text)
			}
			if err := os.WriteFile(filepath.Join(d, f), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return base, head
}

// quarterTeamA cuts team-a's budget from $2.00 to $0.50 an hour, below what its pods cost.
func quarterTeamA(text string) string {
	return strings.Replace(text, `hourlyCost: "2.00"`, `hourlyCost: "0.50"`, 1)
}

func TestPlanReportsTheDifference(t *testing.T) {
	base, head := planSides(t, t.TempDir(), quarterTeamA)
	workload := filepath.Join(repo, "test", "policies", "workload.yaml")
	code, out, errOut := karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	// Each side is exactly what simulate prints for it.
	for side, dir := range map[string]string{"base": base, "head": head} {
		_, sim, _ := karpenterctl(t, "", "simulate", "--nodepools", filepath.Join(dir, "nodepools.yaml"), "--policies", filepath.Join(dir, "policies.yaml"),
			"--workload", workload, "--now", planNow, "-o", "json")
		var want, have any
		_ = json.Unmarshal([]byte(sim), &want)
		_ = json.Unmarshal(got[side], &have)
		if !reflect.DeepEqual(want, have) {
			t.Errorf("plan's %s is not what simulate prints for it", side)
		}
	}
	r := &planReport{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatal(err)
	}
	d := r.Delta
	if want := round4(r.Head.Totals.PricePerHour - r.Base.Totals.PricePerHour); d.PricePerHour != want || d.PricePerMonth != round4(want*HoursPerMonth) {
		t.Errorf("delta $%.4f/hour, $%.4f/month; want $%.4f/hour x 730", d.PricePerHour, d.PricePerMonth, want)
	}
	if d.Nodes != r.Head.Totals.Nodes-r.Base.Totals.Nodes {
		t.Errorf("delta %d nodes; want %d", d.Nodes, r.Head.Totals.Nodes-r.Base.Totals.Nodes)
	}
	a := d.Namespaces["team-a"]
	if a == nil || a.PricePerHour >= 0 || d.Namespaces["team-b"] == nil {
		t.Fatalf("namespace deltas %+v; want team-a cheaper under its cut budget, and team-b", d.Namespaces)
	}
	if want := r.Head.Namespaces["team-a"].SpotPercent - r.Base.Namespaces["team-a"].SpotPercent; a.SpotPercent != round4(want) {
		t.Errorf("team-a's Spot share delta %.4f; want %.4f", a.SpotPercent, want)
	}
	if len(d.NewlyBlocked) == 0 || len(d.Unblocked) != 0 {
		t.Fatalf("newly blocked %v, unblocked %v; want team-a pods newly blocked by the budget", d.NewlyBlocked, d.Unblocked)
	}
	for _, pod := range d.NewlyBlocked {
		if !strings.HasPrefix(pod, "team-a/") {
			t.Errorf("%s newly blocked; only team-a's budget changed", pod)
		}
	}

	_, md, _ := karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow, "-o", "markdown")
	lines := strings.Split(md, "\n")
	// The head blocks pods the base places: its lower $/hour is no saving, and the headline
	// leads with the pods that would stay pending.
	if lines[0] != PlanMarker || !regexp.MustCompile(`^\*\*karpenterctl plan: `+strconv.Itoa(len(d.NewlyBlocked))+
		` pods would stay pending that the base places; \$/hour \d+\.\d\d -> \d+\.\d\d \(-\d+\.\d\d, -\d+\.\d%\) for the pods placed, not a saving; \$/month -\d+\*\*$`).MatchString(lines[1]) {
		t.Errorf("markdown must start with the marker and the headline:\n%s", strings.Join(lines[:2], "\n"))
	}
	for _, want := range []string{"| NodePool | before $/hour |", "| team-a |", "pods newly blocked:", "- `" + d.NewlyBlocked[0] + "`: CapacityBudget team-a/default", "<details>", "</details>"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	_, gh, _ := karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow, "-o", "github")
	// A warning per newly blocked pod, or per workload of more than listAtMost with one reason.
	covered := strings.Count(gh, "::warning title=pod newly blocked::")
	for _, m := range regexp.MustCompile(`::warning title=pods newly blocked::(\d+) pods of `).FindAllStringSubmatch(gh, -1) {
		n, _ := strconv.Atoi(m[1])
		covered += n
	}
	if !strings.HasPrefix(gh, "::notice title=karpenterctl plan::"+strconv.Itoa(len(d.NewlyBlocked))+" pods would stay pending") || covered != len(d.NewlyBlocked) {
		t.Errorf("github output covers %d pods, want %d:\n%s", covered, len(d.NewlyBlocked), gh)
	}
}

// An invalid head fails the plan as validate fails it, naming file, line and field, and is
// not simulated.
func TestPlanRefusesAnInvalidHead(t *testing.T) {
	dir := t.TempDir()
	base, head := planSides(t, dir, nil)
	np := filepath.Join(head, "nodepools.yaml")
	b, _ := os.ReadFile(np)
	if err := os.WriteFile(np, []byte(strings.Replace(string(b), "spec:\n  template:", "spec:\n  weight: 1000\n  template:", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	workload := filepath.Join(repo, "test", "policies", "workload.yaml")
	code, out, _ := karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow)
	if code != exitInvalid || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(np)+`:\d+: NodePool/default: spec.weight: `).MatchString(out) {
		t.Fatalf("exit %d; want 1 and spec.weight named at its line:\n%s", code, out)
	}
	_, js, _ := karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow, "-o", "json")
	r := &planReport{}
	if err := json.Unmarshal([]byte(js), r); err != nil {
		t.Fatal(err)
	}
	if len(r.Invalid) == 0 || r.Invalid[0].Field != "spec.weight" || r.Base != nil || r.Head != nil {
		t.Errorf("JSON of an invalid head: %s", js)
	}
}

// --base git:REF:DIR reads the manifests at REF; the plan is the same as from directories.
func TestPlanReadsABaseFromGit(t *testing.T) {
	dir := t.TempDir()
	base, head := planSides(t, dir, quarterTeamA)
	workload := planWorkload(t)
	_, fromDirs, _ := karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow, "-o", "json")

	git := gitIn(t, dir)
	// The repository holds the base under deploy/ at its first commit; the working tree has
	// the head there.
	if err := os.Rename(base, filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	git("add", "deploy")
	git("commit", "-q", "-m", "base")
	for _, f := range []string{"nodepools.yaml", "policies.yaml"} {
		if err := os.Rename(filepath.Join(head, f), filepath.Join(dir, "deploy", f)); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	code, fromGit, errOut := karpenterctl(t, "", "plan", "--base", "git:main:deploy", "--head", "deploy", "--workload", workload, "--now", planNow, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if simulation(t, fromGit) != simulation(t, fromDirs) {
		t.Errorf("the plan from git:main:deploy differs from the plan from directories:\n%s\n---\n%s", fromGit, fromDirs)
	}
	code, _, errOut = karpenterctl(t, "", "plan", "--base", "git:no-such-branch:deploy", "--head", "deploy", "--workload", workload)
	if code != exitUsage || !strings.Contains(errOut, `"no-such-branch" is not a commit`) {
		t.Errorf("an unknown ref: exit %d, %s", code, errOut)
	}
}

// The first pull request that adds the manifests: the base directory does not exist at the
// base ref, so the base is a cluster without NodePools, where every pod stays pending. A Helm
// chart and a .github directory under the head are not manifests and are skipped, in the
// working tree as in Git.
func TestPlanFromNothingSkipsChartsAndHiddenDirectories(t *testing.T) {
	dir := t.TempDir()
	_, head := planSides(t, dir, nil)
	workload := planWorkload(t)
	deploy := filepath.Join(dir, "deploy")
	if err := os.Rename(head, deploy); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"charts/crd/Chart.yaml":             "apiVersion: v2\nname: crd\nversion: 0.1.0\n",
		"charts/crd/templates/crd.yaml":     "metadata:\n  name: {{ .Values.name }}\n",
		".github/workflows/plan.yaml":       "on: pull_request\njobs: {}\n",
		"charts/crd/values.yaml":            "name: x\n",
		"charts/crd/templates/_helpers.tpl": "{{- define \"x\" }}{{ end }}\n",
	} {
		path := filepath.Join(deploy, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	git := gitIn(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("no manifests yet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	git("add", "README")
	git("commit", "-q", "-m", "before the manifests")
	git("checkout", "-q", "-b", "pr")
	git("add", "deploy")
	git("commit", "-q", "-m", "the manifests")
	t.Chdir(dir)

	code, fromEmpty, errOut := karpenterctl(t, "", "plan", "--base", empty, "--head", "deploy", "--workload", workload, "--now", planNow, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := &planReport{}
	if err := json.Unmarshal([]byte(fromEmpty), r); err != nil {
		t.Fatal(err)
	}
	if r.Base.Totals.Nodes != 0 || r.Base.Totals.PricePerHour != 0 || len(r.Base.Unschedulable) == 0 {
		t.Errorf("a base without NodePools: %d nodes, $%.4f/hour, %d pods pending; want none, nothing, every pod",
			r.Base.Totals.Nodes, r.Base.Totals.PricePerHour, len(r.Base.Unschedulable))
	}
	if r.Head.Totals.Nodes == 0 || r.Delta.PricePerHour != round4(r.Head.Totals.PricePerHour) || len(r.Delta.Unblocked) == 0 || len(r.Delta.NewlyBlocked) != 0 {
		t.Errorf("delta from nothing: $%.4f/hour (head $%.4f), %d unblocked, %d newly blocked",
			r.Delta.PricePerHour, r.Head.Totals.PricePerHour, len(r.Delta.Unblocked), len(r.Delta.NewlyBlocked))
	}
	for _, base := range []string{"git:main:deploy", "git:main"} {
		code, fromGit, errOut := karpenterctl(t, "", "plan", "--base", base, "--head", "git:pr:deploy", "--workload", workload, "--now", planNow, "-o", "json")
		if code != exitOK {
			t.Fatalf("--base %s: exit %d: %s", base, code, errOut)
		}
		if simulation(t, fromGit) != simulation(t, fromEmpty) {
			t.Errorf("the plan from %s to git:pr:deploy differs from the plan from an empty directory:\n%s\n---\n%s", base, fromGit, fromEmpty)
		}
	}
}

// simulation is a plan's JSON without what names files or depends on whether the base has
// an object (admission's notes and warnings): the two sides and the difference.
func simulation(t *testing.T, out string) string {
	t.Helper()
	r := &planReport{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	b, _ := json.Marshal(struct {
		Base, Head any
		Delta      *planDelta
	}{r.Base, r.Head, r.Delta})
	return string(b)
}

// planWorkload is the absolute path of test/policies/workload.yaml, for tests that change
// directory.
func planWorkload(t *testing.T) string {
	t.Helper()
	workload, err := filepath.Abs(filepath.Join(repo, "test", "policies", "workload.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return workload
}

// gitIn runs git in dir, failing the test on an error.
func gitIn(t *testing.T, dir string) func(args ...string) {
	return func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// A plan of thousands of pods still fits a pull-request comment (GitHub takes 65536
// characters): a workload's pods with one reason are one line, and the collapsed block of
// both simulations gives way to a pointer when it would not fit.
func TestPlanOfThousandsOfPodsFitsAComment(t *testing.T) {
	dir := t.TempDir()
	workload := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(workload, []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: team-a}
spec:
  replicas: 3000
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: c
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: 500m, memory: 1Gi}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	pools := filepath.Join(repo, "test", "policies", "nodepools.yaml")
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	code, md, errOut := karpenterctl(t, "", "plan", "--base", empty, "--head", pools, "--workload", workload, "--now", planNow, "-o", "markdown")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if len(md) > 65536 || !strings.Contains(md, "3000 pods no longer blocked: 3000 pods of `team-a/web`") || !strings.Contains(md, "</details>") {
		t.Errorf("markdown of 3000 pods (%d characters):\n%.3000s", len(md), md)
	}
	_, gh, _ := karpenterctl(t, "", "plan", "--base", pools, "--head", empty, "--workload", workload, "--now", planNow, "-o", "github")
	if strings.Count(gh, "::warning ") != 1 || !strings.Contains(gh, "3000 pods of team-a/web (team-a/web-0 ... team-a/web-2999): ") {
		t.Errorf("github output of 3000 pods newly blocked: one warning wanted:\n%.2000s", gh)
	}
}

// git:REF:DIR names DIR from the working directory, as the head's path is, also below a
// hidden directory of the repository (.ops/deploy, run from .ops).
func TestPlanReadsGitFromASubdirectory(t *testing.T) {
	dir := t.TempDir()
	base, _ := planSides(t, dir, nil)
	workload := planWorkload(t)
	ops := filepath.Join(dir, ".ops")
	if err := os.MkdirAll(ops, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(base, filepath.Join(ops, "deploy")); err != nil {
		t.Fatal(err)
	}
	git := gitIn(t, dir)
	git("init", "-q", "-b", "main")
	git("add", ".ops")
	git("commit", "-q", "-m", "the manifests")
	t.Chdir(ops)
	code, out, errOut := karpenterctl(t, "", "plan", "--base", "git:main:deploy", "--head", "deploy", "--workload", workload, "--now", planNow, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := &planReport{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatal(err)
	}
	if r.Base.Totals.Nodes == 0 || r.Base.Totals.Nodes != r.Head.Totals.Nodes || r.Delta.PricePerHour != 0 {
		t.Errorf("base from git:main:deploy in .ops: %d nodes, head %d, delta $%.4f/hour; want the same manifests on both sides",
			r.Base.Totals.Nodes, r.Head.Totals.Nodes, r.Delta.PricePerHour)
	}
}

// A head that adds a ClusterCapacityBudget over team-a and team-b: plan's per-team table says
// what they spend together before and after, within the limit, and the pods it holds name it;
// simulate holds them to it too.
func TestPlanReportsATeamBudget(t *testing.T) {
	const team = `
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: platform}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {team: platform}}
`
	const clusterBudget = `
---
apiVersion: policy.karpenter.sh/v1
kind: ClusterCapacityBudget
metadata: {name: platform}
spec:
  namespaceSelector: {matchLabels: {team: platform}}
  limits: {hourlyCost: "1.50"}
  enforcement: Deny
`
	base, head := planSides(t, t.TempDir(), func(text string) string { return text + team + clusterBudget })
	if err := os.WriteFile(filepath.Join(base, "policies.yaml"), []byte(mustRead(t, filepath.Join(base, "policies.yaml"))+team), 0o644); err != nil {
		t.Fatal(err)
	}
	workload := filepath.Join(repo, "test", "policies", "workload.yaml")
	code, out, errOut := karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := &planReport{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatal(err)
	}
	tr := r.Head.Teams["platform"]
	if tr == nil || tr.HourlyLimit == nil || *tr.HourlyLimit != 1.5 || !reflect.DeepEqual(tr.Namespaces, []string{"team-a", "team-b"}) {
		t.Fatalf("the head's team: %+v", tr)
	}
	together := r.Head.Namespaces["team-a"].PricePerHour + r.Head.Namespaces["team-b"].PricePerHour
	if tr.PricePerHour > 1.5+0.005 || tr.PricePerHour < together-0.01 || tr.PricePerHour > together+0.01 {
		t.Errorf("the team spends %.4f/hour, its namespaces %.4f together, its limit 1.50", tr.PricePerHour, together)
	}
	if len(tr.BlockedPods) == 0 || !strings.Contains(tr.BlockedPods[0].Reason, "ClusterCapacityBudget platform") {
		t.Errorf("the team holds %v", tr.BlockedPods)
	}
	if d := r.Delta.Teams["platform"]; d == nil || d.PricePerHour != round4(tr.PricePerHour) {
		t.Errorf("team delta %+v, want %.4f (no team in the base)", d, tr.PricePerHour)
	}
	_, md, _ := karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow, "-o", "markdown")
	if !strings.Contains(md, "| team (ClusterCapacityBudget) | namespaces |") || !strings.Contains(md, "| platform | 2 | 0.0000 |") {
		t.Errorf("markdown lacks the team table:\n%s", md)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
