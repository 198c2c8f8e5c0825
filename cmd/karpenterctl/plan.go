package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/offline"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/simulate"
)

// HoursPerMonth is the month plan prices a run-rate over (365 x 24 / 12).
const HoursPerMonth = 730

// PlanMarker is the hidden line of plan's markdown, by which a CI job finds its own
// pull-request comment to update.
const PlanMarker = "<!-- karpenterctl-plan -->"

// planReport is `plan -o json`: each side exactly as `simulate -o json` prints it, and the
// difference.
type planReport struct {
	Base    *simulate.Report  `json:"base"`
	Head    *simulate.Report  `json:"head"`
	Delta   *planDelta        `json:"delta"`
	Invalid []offline.Problem `json:"invalid"`
}

type planDelta struct {
	PricePerHour  float64                    `json:"pricePerHour"`
	PricePerMonth float64                    `json:"pricePerMonth"`
	Nodes         int                        `json:"nodes"`
	Namespaces    map[string]*namespaceDelta `json:"namespaces"`
	NewlyBlocked  []string                   `json:"newlyBlocked"`
	Unblocked     []string                   `json:"unblocked"`
}

// namespaceDelta is head minus base for one namespace.
type namespaceDelta struct {
	PricePerHour float64 `json:"pricePerHour"`
	SpotPercent  float64 `json:"spotPercent"`
}

func planCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, _, provider := newFlags("plan", stderr)
	base := fs.String("base", "", "the configuration before the change: a file, a directory, or git:REF[:DIR]")
	head := fs.String("head", "", "the configuration after the change: a file, a directory, or git:REF[:DIR]")
	var workloadPaths, nodePaths paths
	fs.Var(&workloadPaths, "workload", "Pods, Deployments, ReplicaSets, StatefulSets, Jobs and DaemonSets (and CapacityBuffers with their PodTemplates) both sides run; repeatable")
	fs.Var(&nodePaths, "nodes", "existing Nodes, with the Pods bound to them; repeatable")
	instanceTypes := fs.String("instance-types", "", "instance-type catalog (JSON); default: the kwok provider's embedded catalog")
	nowFlag := fs.String("now", "", "the time budgets are evaluated at (RFC 3339, UTC); default: now")
	output := fs.String("o", "text", "output format: text, markdown (a pull-request comment), json or github (workflow commands)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 || *base == "" || *head == "" || len(workloadPaths) == 0 {
		fmt.Fprintln(stderr, "karpenterctl plan: give --base PATH, --head PATH and --workload PATH, and nothing else")
		return exitUsage
	}
	switch *output {
	case "text", "markdown", "json", "github":
	default:
		fmt.Fprintf(stderr, "karpenterctl plan: -o must be text, markdown, json or github, got %q\n", *output)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "karpenterctl plan:", err)
		return exitUsage
	}
	conv, cat, now, err := simulationSettings(*provider, *instanceTypes, *nowFlag)
	if err != nil {
		return fail(err)
	}
	baseDocs, err := readSide(*base, stdin)
	if err != nil {
		return fail(fmt.Errorf("--base: %w", err))
	}
	headDocs, err := readSide(*head, stdin)
	if err != nil {
		return fail(fmt.Errorf("--head: %w", err))
	}
	workload, err := offline.ReadPaths(workloadPaths, stdin)
	if err != nil {
		return fail(err)
	}
	var nodes []offline.Document
	if len(nodePaths) > 0 {
		if nodes, err = offline.ReadPaths(nodePaths, stdin); err != nil {
			return fail(err)
		}
	}

	// The head is validated as `validate` validates it; an invalid head is not simulated.
	v, err := newValidator(*provider)
	if err != nil {
		return fail(err)
	}
	report := &planReport{Invalid: v.Validate(context.Background(), headDocs).Problems}
	if report.Invalid == nil {
		report.Invalid = []offline.Problem{}
	}
	if len(report.Invalid) > 0 {
		writeInvalid(stdout, *output, report)
		return exitInvalid
	}

	side := func(name string, docs []offline.Document) (*simulate.Report, error) {
		var buffers []offline.Document
		src := simSources{nodes: nodes}
		src.nodePools, src.policies, buffers = splitSide(docs)
		src.workload = append(append([]offline.Document(nil), workload...), buffers...)
		in := &simulate.Input{InstanceTypes: cat.ForProvider()}
		if err := loadSimulation(src, in, &simulate.DisruptInput{Now: now}, false, conv, now); err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		r, err := simulate.Run(context.Background(), in)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		return r, nil
	}
	if report.Base, err = side("base", baseDocs); err != nil {
		return fail(err)
	}
	if report.Head, err = side("head", headDocs); err != nil {
		return fail(err)
	}
	report.Delta = delta(report.Base, report.Head)
	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
	case "markdown":
		writePlanMarkdown(stdout, report)
	case "github":
		writePlanGitHub(stdout, report)
	default:
		writePlanText(stdout, report)
	}
	return exitOK
}

// readSide reads one side of a plan: a file or directory of manifests, or git:REF[:DIR], the
// manifests under DIR (a path from the working directory; all of them without it) at REF of
// the working directory's Git repository.
func readSide(spec string, stdin io.Reader) ([]offline.Document, error) {
	rest, ok := strings.CutPrefix(spec, "git:")
	if !ok {
		return offline.ReadPaths([]string{spec}, stdin)
	}
	ref, dir, _ := strings.Cut(rest, ":")
	if ref == "" {
		return nil, fmt.Errorf("%s: no Git ref (want git:REF[:DIR])", spec)
	}
	git := func(args ...string) ([]byte, error) {
		var out, errOut bytes.Buffer
		cmd := exec.Command("git", args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: git %s: %v: %s", spec, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
		}
		return out.Bytes(), nil
	}
	if _, err := git("rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
		return nil, fmt.Errorf("%s: %q is not a commit of this repository", spec, ref)
	}
	args := []string{"ls-tree", "-r", "-z", "--full-name", "--name-only", ref}
	if dir != "" {
		args = append(args, "--", dir)
	}
	list, err := git(args...)
	if err != nil {
		return nil, err
	}
	var docs []offline.Document
	names := strings.Split(strings.TrimRight(string(list), "\x00"), "\x00")
	// Git lists full paths; DIR is relative to the working directory.
	prefix, err := git("rev-parse", "--show-prefix")
	if err != nil {
		return nil, err
	}
	skipped := offline.Skipped(path.Join(strings.TrimSpace(string(prefix)), dir), names)
	for _, name := range names {
		if skipped[name] {
			continue // as a directory walk skips it (offline.ReadPaths)
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		blob, err := git("cat-file", "blob", ref+":"+name)
		if err != nil {
			return nil, err
		}
		d, err := offline.Parse(ref+":"+name, blob)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	return docs, nil
}

// splitSide sorts a side's documents into what the simulation reads: NodePools and
// NodeOverlays, the policy layer (CapacityBudgets, CapacityPolicies, Namespaces), and the
// room kept (CapacityBuffers and the PodTemplates they name), which joins the workload.
// Node classes and other kinds are validated, not simulated (a simulation's node classes are
// its catalog).
func splitSide(docs []offline.Document) (nodePools, policies, buffers []offline.Document) {
	for _, d := range docs {
		if d.Object == nil {
			continue
		}
		gvk := d.GVK()
		switch {
		case gvk.Group == "karpenter.sh" && (gvk.Kind == "NodePool" || gvk.Kind == "NodeOverlay"):
			nodePools = append(nodePools, d)
		case gvk.Group == "policy.karpenter.sh" && (gvk.Kind == "CapacityBudget" || gvk.Kind == "CapacityPolicy"),
			gvk.Group == "" && gvk.Kind == "Namespace":
			policies = append(policies, d)
		case gvk.Group == "autoscaling.x-k8s.io" && gvk.Kind == "CapacityBuffer", gvk.Group == "" && gvk.Kind == "PodTemplate":
			buffers = append(buffers, d)
		}
	}
	return nodePools, policies, buffers
}

// blocked are a report's pods that stay pending, with the reason: the policies' for pods they
// block, else the solver's.
func blocked(r *simulate.Report) map[string]string {
	out := map[string]string{}
	for _, u := range r.Unschedulable {
		out[u.Pod] = u.Reason
	}
	for _, ns := range r.Namespaces {
		for _, b := range ns.BlockedPods {
			out[b.Pod] = b.Reason
		}
	}
	return out
}

func delta(base, head *simulate.Report) *planDelta {
	d := &planDelta{
		PricePerHour: round4(head.Totals.PricePerHour - base.Totals.PricePerHour),
		Nodes:        head.Totals.Nodes - base.Totals.Nodes,
		Namespaces:   map[string]*namespaceDelta{}, NewlyBlocked: []string{}, Unblocked: []string{},
	}
	d.PricePerMonth = round4(d.PricePerHour * HoursPerMonth)
	for name := range joinKeys(base.Namespaces, head.Namespaces) {
		var b, h simulate.NamespaceReport
		if n := base.Namespaces[name]; n != nil {
			b = *n
		}
		if n := head.Namespaces[name]; n != nil {
			h = *n
		}
		d.Namespaces[name] = &namespaceDelta{PricePerHour: round4(h.PricePerHour - b.PricePerHour), SpotPercent: round4(h.SpotPercent - b.SpotPercent)}
	}
	before, after := blocked(base), blocked(head)
	for pod := range after {
		if _, ok := before[pod]; !ok {
			d.NewlyBlocked = append(d.NewlyBlocked, pod)
		}
	}
	for pod := range before {
		if _, ok := after[pod]; !ok {
			d.Unblocked = append(d.Unblocked, pod)
		}
	}
	sortNatural(d.NewlyBlocked)
	sortNatural(d.Unblocked)
	return d
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }
