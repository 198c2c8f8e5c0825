package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/offline"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/simulate"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
)

func simulateCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, _, provider := newFlags("simulate", stderr)
	var nodePoolPaths, workloadPaths, nodePaths, policyPaths paths
	fs.Var(&nodePoolPaths, "nodepools", "NodePools (v1 or v1beta1) and NodeOverlays: file, directory or -; repeatable")
	fs.Var(&workloadPaths, "workload", "Pods, Deployments, ReplicaSets, StatefulSets, Jobs and DaemonSets, and CapacityBuffers with their PodTemplates; repeatable")
	fs.Var(&nodePaths, "nodes", "existing Nodes, with the Pods bound to them; repeatable")
	fs.Var(&policyPaths, "policies", "CapacityBudgets, CapacityPolicies and Namespaces (for their labels) to apply; repeatable")
	instanceTypes := fs.String("instance-types", "", "instance-type catalog (JSON); default: the kwok provider's embedded catalog")
	nowFlag := fs.String("now", "", "the time budgets are evaluated at (RFC 3339, UTC); default: now")
	output := fs.String("o", "table", "output format: json, table or markdown")
	disrupt := fs.Bool("disrupt", false, "run disruption passes on the --nodes cluster (consolidation, drift, expiration) and report the commands")
	maxCommands := fs.Int("max-commands", 0, "with --disrupt: stop after this many commands (0: until no method acts)")
	gates := fs.String("feature-gates", "", "with --disrupt: feature gates, e.g. SpotToSpotConsolidation=true")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	switch {
	case fs.NArg() > 0 || len(nodePoolPaths) == 0:
		fmt.Fprintln(stderr, "karpenterctl simulate: give --nodepools PATH and --workload PATH (or --disrupt with --nodes PATH)")
		return exitUsage
	case !*disrupt && len(workloadPaths) == 0:
		fmt.Fprintln(stderr, "karpenterctl simulate: give --nodepools PATH and --workload PATH (or --disrupt with --nodes PATH)")
		return exitUsage
	case *disrupt && len(nodePaths) == 0:
		fmt.Fprintln(stderr, "karpenterctl simulate --disrupt: give --nodes PATH, the cluster to disrupt")
		return exitUsage
	case *maxCommands < 0:
		fmt.Fprintln(stderr, "karpenterctl simulate: --max-commands must not be negative")
		return exitUsage
	}
	opts, err := disruptOptions(*gates)
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl simulate: --feature-gates:", err)
		return exitUsage
	}
	switch *output {
	case "json", "table", "markdown":
	default:
		fmt.Fprintf(stderr, "karpenterctl simulate: -o must be json, table or markdown, got %q\n", *output)
		return exitUsage
	}
	conv, cat, now, err := simulationSettings(*provider, *instanceTypes, *nowFlag)
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl simulate:", err)
		return exitUsage
	}
	in := &simulate.Input{InstanceTypes: cat.ForProvider()}
	din := &simulate.DisruptInput{Now: now, MaxCommands: *maxCommands, Options: opts}
	var src simSources
	read := func(ps paths, into *[]offline.Document) {
		if err == nil && len(ps) > 0 {
			*into, err = offline.ReadPaths(ps, stdin)
		}
	}
	read(nodePoolPaths, &src.nodePools)
	read(workloadPaths, &src.workload)
	read(nodePaths, &src.nodes)
	read(policyPaths, &src.policies)
	if err == nil {
		err = loadSimulation(src, in, din, *disrupt, conv, now)
	}
	if err == nil && len(in.NodePools) == 0 {
		err = fmt.Errorf("--nodepools: no NodePool in %s", strings.Join(nodePoolPaths, ", "))
	}
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl simulate:", err)
		return exitUsage
	}
	var report *simulate.Report
	if *disrupt {
		din.Input = *in
		report, err = simulate.Disrupt(context.Background(), din)
	} else {
		report, err = simulate.Run(context.Background(), in)
	}
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl simulate:", err)
		return exitUsage
	}
	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
	case "markdown":
		if report.Disruption != nil {
			writeDisruptionMarkdown(stdout, report.Disruption)
			writeNodePricing(stdout, report.Nodes, "- ")
		} else {
			writeMarkdown(stdout, report)
		}
	default:
		if report.Disruption != nil {
			writeDisruptionTable(stdout, report.Disruption)
			writeNodePricing(stdout, report.Nodes, "")
		} else {
			writeTable(stdout, report)
		}
	}
	return exitOK
}

func writeTable(w io.Writer, r *simulate.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODEPOOL\tINSTANCE TYPE\tCAPACITY\tZONE\t$/HOUR\tPODS\tOPTIONS")
	for _, c := range r.NodeClaims {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%d\t%d\n", c.NodePool, c.InstanceType, c.CapacityType, c.Zone, c.PricePerHour, len(c.Pods), len(c.InstanceTypes))
	}
	_ = tw.Flush()
	for _, n := range r.ExistingNodes {
		fmt.Fprintf(w, "existing node %s: %d pods\n", n.Name, len(n.Pods))
	}
	writeNodePricing(w, r.Nodes, "")
	for _, u := range r.Unschedulable {
		fmt.Fprintf(w, "unschedulable %s: %s\n", u.Pod, u.Reason)
	}
	writeNamespaces(w, r, func(name string, n *simulate.NamespaceReport, limit string) string {
		return fmt.Sprintf("namespace %s: $%.4f/hour%s, Spot %.1f%%, %d pods blocked", name, n.PricePerHour, limit, n.SpotPercent, len(n.BlockedPods))
	})
	t := r.Totals
	fmt.Fprintf(w, "total: %d nodes, $%.4f/hour, cpu %.0f%%, memory %.0f%% allocated; lower bound $%.4f/hour (x%.3f); %d pods placed, %d unschedulable\n",
		t.Nodes, t.PricePerHour, t.CPUUtilization*100, t.MemoryUtilization*100, t.LowerBoundPerHour, t.RatioToLowerBound, t.Pods, t.Unschedulable)
}

func writeMarkdown(w io.Writer, r *simulate.Report) {
	t := r.Totals
	fmt.Fprintf(w, "**%d new nodes, $%.4f/hour** (lower bound $%.4f/hour, x%.3f; cpu %.0f%%, memory %.0f%% allocated)\n\n",
		t.Nodes, t.PricePerHour, t.LowerBoundPerHour, t.RatioToLowerBound, t.CPUUtilization*100, t.MemoryUtilization*100)
	if len(r.NodeClaims) > 0 {
		fmt.Fprintln(w, "| NodePool | instance type | capacity | zone | $/hour | pods |")
		fmt.Fprintln(w, "|---|---|---|---|---:|---:|")
		for _, c := range r.NodeClaims {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %.4f | %d |\n", c.NodePool, c.InstanceType, c.CapacityType, c.Zone, c.PricePerHour, len(c.Pods))
		}
		fmt.Fprintln(w)
	}
	if len(r.Namespaces) > 0 {
		fmt.Fprintln(w, "| namespace | $/hour | limit | Spot % | blocked pods |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
		writeNamespaces(w, r, func(name string, n *simulate.NamespaceReport, limit string) string {
			if limit == "" {
				limit = "-"
			}
			return fmt.Sprintf("| %s | %.4f | %s | %.1f | %d |", name, n.PricePerHour, strings.TrimPrefix(limit, " of $"), n.SpotPercent, len(n.BlockedPods))
		})
		fmt.Fprintln(w)
	}
	writeNodePricing(w, r.Nodes, "- ")
	if len(r.Unschedulable) > 0 {
		fmt.Fprintf(w, "%d pods stay pending:\n\n", len(r.Unschedulable))
		for _, u := range r.Unschedulable {
			fmt.Fprintf(w, "- `%s`: %s\n", u.Pod, strings.ReplaceAll(u.Reason, "|", "\\|"))
		}
	}
}

// writeNodePricing says how the existing nodes whose capacity type karpenter.sh/capacity-type
// does not give were priced: from another provisioner's label, or assumed on-demand.
func writeNodePricing(w io.Writer, nodes []simulate.PricedNode, bullet string) {
	n := 0
	for _, p := range nodes {
		if p.CapacityTypeFrom == karpv1.CapacityTypeLabelKey {
			continue
		}
		fmt.Fprintf(w, "%snode %s (%s) priced %s (%s): $%.4f/hour\n", bullet, p.Name, p.InstanceType, p.CapacityType, p.Assumed(), p.PricePerHour)
		n++
	}
	if n > 0 && bullet != "" {
		fmt.Fprintln(w)
	}
}

// writeNamespaces prints a line per namespace, in name order, then the policy warnings.
func writeNamespaces(w io.Writer, r *simulate.Report, line func(name string, n *simulate.NamespaceReport, limit string) string) {
	names := slices.Sorted(maps.Keys(r.Namespaces))
	for _, name := range names {
		n := r.Namespaces[name]
		limit := ""
		if n.HourlyLimit != nil {
			limit = fmt.Sprintf(" of $%.2f", *n.HourlyLimit)
		}
		fmt.Fprintln(w, line(name, n, limit))
	}
	for _, pw := range r.PolicyWarnings {
		fmt.Fprintln(w, "policy warning:", pw)
	}
}

type policyDoc struct {
	policy *policyv1.CapacityPolicy
	doc    offline.Document
}

// newPlanner builds the policy planner of a simulation; a CapacityPolicy that does not compile
// is an error naming its file and line.
func newPlanner(pols []policyDoc, budgets []*policyv1.CapacityBudget, clusterBudgets []*policyv1.ClusterCapacityBudget, exceptions []policyv1.CapacityException, namespaces []*corev1.Namespace, now time.Time) (*planner.Planner, error) {
	engine, err := policies.NewEngine()
	if err != nil {
		return nil, err
	}
	// CapacityExceptions apply as in the cluster, decided at --now.
	for _, err := range engine.SetExceptions(exceptions) {
		return nil, err
	}
	objs := make([]policyv1.CapacityPolicy, len(pols))
	where := map[string]offline.Document{}
	for i, p := range pols {
		objs[i] = *p.policy
		where[p.policy.Name] = p.doc
	}
	if probs := engine.SetPolicies(objs); len(probs) > 0 {
		var msgs []string
		for _, pp := range probs {
			d := where[pp.Policy]
			for _, pr := range pp.Problems {
				msgs = append(msgs, fmt.Sprintf("%s:%d: CapacityPolicy %s: %s", d.File, d.Line, pp.Policy, pr.Error()))
			}
		}
		return nil, fmt.Errorf("policies do not compile:\n  %s", strings.Join(msgs, "\n  "))
	}
	// The pods come from manifests: in the cluster, the CapacityBudget gate's webhook gates
	// those of namespaces whose budget holds pods back.
	pl := &planner.Planner{Engine: engine, Namespaces: map[string]policies.Namespace{}, Budgets: map[string]*policyv1.CapacityBudget{}, Now: now, AssumeGated: true}
	for _, ns := range namespaces {
		pl.Namespaces[ns.Name] = policies.Namespace{Name: ns.Name, Labels: ns.Labels}
	}
	for _, b := range budgets {
		if prev, ok := pl.Budgets[b.Namespace]; ok {
			return nil, fmt.Errorf("namespace %s has two CapacityBudgets, %s and %s; a namespace has one", b.Namespace, prev.Name, b.Name)
		}
		pl.Budgets[b.Namespace] = b
	}
	pl.ClusterBudgets = planner.ClusterBudgets(clusterBudgets)
	return pl, nil
}

// simulationSettings are what simulate and plan take alike: the converter of v1beta1
// NodePools for the provider, the instance-type catalog (--instance-types, else the embedded
// one) and the time budgets are evaluated at (--now, else now).
func simulationSettings(provider, instanceTypes, nowFlag string) (*conversion.Converter, *catalog.File, time.Time, error) {
	conv := &conversion.Converter{DefaultNodeClass: conversion.KWOKNodeClass}
	if provider == "aws" {
		conv.DefaultNodeClass = conversion.EC2NodeClass
	}
	cat := catalog.Embedded()
	if instanceTypes != "" {
		var err error
		if cat, err = catalog.Load(instanceTypes); err != nil {
			return nil, nil, time.Time{}, err
		}
	}
	now := time.Now().UTC()
	if nowFlag != "" {
		t, err := time.Parse(time.RFC3339, nowFlag)
		if err != nil {
			return nil, nil, time.Time{}, fmt.Errorf("--now: %w", err)
		}
		now = t.UTC()
	}
	return conv, cat, now, nil
}

// simSources are the documents of one simulation, by the flag they came from.
type simSources struct {
	nodePools, workload, nodes, policies []offline.Document
}

// loadSimulation decodes the documents into the simulation's input: NodePools (v1beta1 ones
// converted as the webhook would), workloads, existing nodes (and, with disrupt, their
// NodeClaims and PDBs), and the policy planner. Errors name the file and line.
func loadSimulation(src simSources, in *simulate.Input, din *simulate.DisruptInput, disrupt bool, conv *conversion.Converter, now time.Time) error {
	scheme := install.NewScheme()
	load := func(docs []offline.Document, accept func(runtime.Object, offline.Document) error) error {
		for _, d := range docs {
			if d.Object == nil {
				continue
			}
			gvk := d.GVK()
			obj, err := scheme.New(gvk)
			if err != nil {
				return fmt.Errorf("%s:%d: %s %s: not a kind simulate reads", d.File, d.Line, gvk.GroupVersion(), gvk.Kind)
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, obj); err != nil {
				return fmt.Errorf("%s:%d: %s/%s: %w", d.File, d.Line, gvk.Kind, d.Name(), err)
			}
			if err := accept(obj, d); err != nil {
				return err
			}
		}
		return nil
	}
	var namespaces []*corev1.Namespace
	err := load(src.nodePools, func(o runtime.Object, d offline.Document) error {
		switch np := o.(type) {
		case *karpv1.NodePool:
			in.NodePools = append(in.NodePools, np)
			return nil
		case *karpv1beta1.NodePool:
			// The simulation takes v1 only: a v1beta1 NodePool is converted here, as the
			// conversion webhook would convert it in the cluster.
			hub := &karpv1.NodePool{}
			if err := conv.NodePoolToV1(context.Background(), np, hub); err != nil {
				return fmt.Errorf("%s:%d: converting NodePool %s to v1: %w", d.File, d.Line, np.Name, err)
			}
			in.NodePools = append(in.NodePools, hub)
			return nil
		case *karpv1alpha1.NodeOverlay:
			in.NodeOverlays = append(in.NodeOverlays, np)
			return nil
		}
		return fmt.Errorf("%s:%d: %s is not a NodePool or a NodeOverlay", d.File, d.Line, d.GVK().Kind)
	})
	if err == nil {
		err = load(src.workload, func(o runtime.Object, d offline.Document) error {
			switch v := o.(type) {
			case *corev1.Pod, *appsv1.Deployment, *appsv1.ReplicaSet, *appsv1.StatefulSet, *batchv1.Job, *appsv1.DaemonSet:
				in.Workloads = append(in.Workloads, o)
				return nil
			case *corev1.Namespace:
				namespaces = append(namespaces, v)
				return nil
			case *corev1.LimitRange:
				in.LimitRanges = append(in.LimitRanges, v)
				return nil
			case *nodev1.RuntimeClass:
				in.RuntimeClasses = append(in.RuntimeClasses, v)
				return nil
			case *autoscalingv1beta1.CapacityBuffer:
				in.CapacityBuffers = append(in.CapacityBuffers, v)
				return nil
			case *corev1.PodTemplate:
				in.PodTemplates = append(in.PodTemplates, v)
				return nil
			}
			if in.Storage.Add(o) {
				return nil
			}
			return fmt.Errorf("%s:%d: %s is not a workload (Pod, Deployment, ReplicaSet, StatefulSet, Job, DaemonSet), what admits one (Namespace, LimitRange, RuntimeClass), "+
				"room kept for one (CapacityBuffer, PodTemplate) "+
				"or storage (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode)", d.File, d.Line, d.GVK().Kind)
		})
	}
	if err == nil && len(src.nodes) > 0 {
		err = load(src.nodes, func(o runtime.Object, d offline.Document) error {
			switch v := o.(type) {
			case *corev1.Node:
				in.Nodes = append(in.Nodes, readyUnlessStated(v))
				return nil
			case *corev1.Pod:
				if v.Spec.NodeName == "" {
					return fmt.Errorf("%s:%d: pod %s in --nodes has no spec.nodeName", d.File, d.Line, v.Name)
				}
				in.BoundPods = append(in.BoundPods, v)
				return nil
			case *k8spolicyv1.PodDisruptionBudget:
				if disrupt {
					din.PDBs = append(din.PDBs, v)
					return nil
				}
				return fmt.Errorf("%s:%d: PodDisruptionBudget %s in --nodes is read only with --disrupt", d.File, d.Line, v.Name)
			case *karpv1.NodeClaim:
				if disrupt {
					din.NodeClaims = append(din.NodeClaims, v)
					return nil
				}
				return fmt.Errorf("%s:%d: NodeClaim %s in --nodes is read only with --disrupt", d.File, d.Line, v.Name)
			}
			if in.Storage.Add(o) {
				return nil
			}
			return fmt.Errorf("%s:%d: %s is not a Node, a Pod, a PodDisruptionBudget, a NodeClaim or storage (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode)",
				d.File, d.Line, d.GVK().Kind)
		})
	}
	var pols []policyDoc
	var budgets []*policyv1.CapacityBudget
	var clusterBudgets []*policyv1.ClusterCapacityBudget
	var exceptions []policyv1.CapacityException
	if err == nil && len(src.policies) > 0 {
		err = load(dedupePolicies(src.policies), func(o runtime.Object, d offline.Document) error {
			switch v := o.(type) {
			case *policyv1.CapacityBudget:
				if v.Namespace == "" {
					return fmt.Errorf("%s:%d: CapacityBudget %s has no metadata.namespace: a budget governs the namespace it is in", d.File, d.Line, v.Name)
				}
				budgets = append(budgets, v)
			case *policyv1.CapacityPolicy:
				pols = append(pols, policyDoc{v, d})
			case *policyv1.ClusterCapacityBudget:
				if _, err := metav1.LabelSelectorAsSelector(&v.Spec.NamespaceSelector); err != nil {
					return fmt.Errorf("%s:%d: ClusterCapacityBudget %s: spec.namespaceSelector: %w", d.File, d.Line, v.Name, err)
				}
				clusterBudgets = append(clusterBudgets, v)
			case *policyv1.CapacityException:
				exceptions = append(exceptions, *v)
			case *corev1.Namespace:
				namespaces = append(namespaces, v)
			default:
				return fmt.Errorf("%s:%d: %s is not a CapacityBudget, ClusterCapacityBudget, CapacityPolicy, CapacityException or Namespace", d.File, d.Line, d.GVK().Kind)
			}
			return nil
		})
		if err == nil {
			in.Planner, err = newPlanner(pols, budgets, clusterBudgets, exceptions, namespaces, now)
		}
	}
	return err
}

// dedupePolicies keeps the last document of each kind, namespace and name: a pull request's
// object replaces the cluster's (--policies) of the same name, as an apply would.
func dedupePolicies(docs []offline.Document) []offline.Document {
	last := map[string]int{}
	key := func(d offline.Document) string {
		return d.GVK().Kind + "/" + namespaceOf(d.Object) + "/" + d.Name()
	}
	for i, d := range docs {
		if d.Object != nil {
			last[key(d)] = i
		}
	}
	out := make([]offline.Document, 0, len(last))
	for i, d := range docs {
		if d.Object != nil && last[key(d)] == i {
			out = append(out, d)
		}
	}
	return out
}

// namespaceOf is a manifest's metadata.namespace, "" when it has none.
func namespaceOf(o map[string]any) string {
	m, _ := o["metadata"].(map[string]any)
	ns, _ := m["namespace"].(string)
	return ns
}

// readyUnlessStated gives a node written without a Ready condition (a manifest describing a
// running node seldom states one) a Ready one, as a running node reports; a node whose
// manifest states its readiness keeps it (docs/simulate.md).
func readyUnlessStated(n *corev1.Node) *corev1.Node {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return n
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"})
	return n
}
