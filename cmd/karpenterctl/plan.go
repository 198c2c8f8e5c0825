package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

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
	// Warnings are what admission would warn about on the head at the ci enforcement point
	// (policies' warn and dry-run results, evaluation errors, fields not acted on); Notes what
	// it says of cost; Undecided the policy rules the inputs cannot decide.
	Warnings  []offline.Problem `json:"warnings"`
	Notes     []offline.Problem `json:"notes"`
	Undecided []offline.Problem `json:"undecided"`
	// Gates are the CI gates asked for (--max-increase, --fail-on-blocked, --fail-on-warn).
	Gates []gateResult `json:"gates"`
}

type planDelta struct {
	PricePerHour  float64                    `json:"pricePerHour"`
	PricePerMonth float64                    `json:"pricePerMonth"`
	Nodes         int                        `json:"nodes"`
	Namespaces    map[string]*namespaceDelta `json:"namespaces"`
	// Teams are the ClusterCapacityBudgets' namespaces together, by its name.
	Teams        map[string]*teamDelta `json:"teams,omitempty"`
	NewlyBlocked []string              `json:"newlyBlocked"`
	Unblocked    []string              `json:"unblocked"`
}

// teamDelta is head minus base for one ClusterCapacityBudget's namespaces together.
type teamDelta struct {
	PricePerHour float64 `json:"pricePerHour"`
	SpotPercent  float64 `json:"spotPercent"`
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
	nowFlag := fs.String("now", "", "the time budgets and CapacityExceptions are evaluated at (RFC 3339, UTC); default: now")
	output := fs.String("o", "text", "output format: text, markdown (a pull-request comment), json, github (workflow commands) or junit (JUnit XML)")
	var cluster clusterInputs
	cluster.register(fs)
	var gates planGates
	fs.Var(&gates.maxIncrease, "max-increase", "gate: exit 3 when the head raises $/hour by more than AMOUNT (0.50, dollars per hour) or a share of the base's (10%)")
	fs.BoolVar(&gates.failOnBlocked, "fail-on-blocked", false, "gate: exit 3 when the head blocks a pod the base places")
	fs.BoolVar(&gates.failOnWarn, "fail-on-warn", false, "gate: exit 3 when admission warns about the head (a policy's warn or dry-run result, an evaluation error, a rule undecided offline, a field not acted on)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 || *base == "" || *head == "" || len(workloadPaths) == 0 {
		fmt.Fprintln(stderr, "karpenterctl plan: give --base PATH, --head PATH and --workload PATH, and nothing else")
		return exitUsage
	}
	switch *output {
	case "text", "markdown", "json", "github", "junit":
	default:
		fmt.Fprintf(stderr, "karpenterctl plan: -o must be text, markdown, json, github or junit, got %q\n", *output)
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

	clusterDocs, err := cluster.readPolicies(stdin)
	if err != nil {
		return fail(err)
	}

	// The head is validated as `validate` validates it, with the webhook's policy review at
	// the ci point: an object the base has is an update of it. An invalid head is not
	// simulated.
	v, err := newValidator(*provider)
	if err != nil {
		return fail(err)
	}
	v.Webhooks.Now, v.Webhooks.MaxExceptionDuration = func() time.Time { return now }, cluster.maxException
	existing := v.Objects(context.Background(), baseDocs)
	if existing == nil {
		existing = []runtime.Object{}
	}
	if v.Admission, err = cluster.admission(admissionInputs{inputs: headDocs, clusterDocs: clusterDocs, nodes: nodes, cat: cat, conv: conv, now: now,
		existing: existing}, stdin); err != nil {
		return fail(err)
	}
	validated := v.Validate(context.Background(), headDocs)
	report := &planReport{Invalid: validated.Problems, Warnings: validated.Warnings, Notes: validated.Notes, Undecided: validated.Undecided, Gates: []gateResult{}}
	if len(report.Invalid) > 0 {
		writeInvalid(stdout, *output, report, &gates)
		return exitInvalid
	}

	side := func(name string, docs []offline.Document) (*simulate.Report, error) {
		var buffers []offline.Document
		src := simSources{nodes: nodes}
		// The cluster's policies (--policies) apply on both sides, each side's own replacing
		// those of the same name.
		src.nodePools, src.policies, buffers = splitSide(append(append([]offline.Document(nil), clusterDocs...), docs...))
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
	report.Gates = append(report.Gates, gates.check(report)...)
	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
	case "markdown":
		writePlanMarkdown(stdout, report)
	case "github":
		writePlanGitHub(stdout, report)
	case "junit":
		writePlanJUnit(stdout, report, &gates)
	default:
		writePlanText(stdout, report)
	}
	if len(failed(report.Gates)) > 0 {
		return exitGate
	}
	return exitOK
}

// readSide reads one side of a plan: a file or directory of manifests, or git:REF[:DIR]
// (offline.ReadSource).
func readSide(spec string, stdin io.Reader) ([]offline.Document, error) {
	return offline.ReadSource(spec, stdin)
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
		case gvk.Group == "policy.karpenter.sh" && (gvk.Kind == "CapacityBudget" || gvk.Kind == "ClusterCapacityBudget" || gvk.Kind == "CapacityPolicy"),
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
	for name := range joinKeys(base.Teams, head.Teams) {
		var b, h simulate.TeamReport
		if t := base.Teams[name]; t != nil {
			b = *t
		}
		if t := head.Teams[name]; t != nil {
			h = *t
		}
		if d.Teams == nil {
			d.Teams = map[string]*teamDelta{}
		}
		d.Teams[name] = &teamDelta{PricePerHour: round4(h.PricePerHour - b.PricePerHour), SpotPercent: round4(h.SpotPercent - b.SpotPercent)}
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
