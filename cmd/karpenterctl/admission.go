package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/cmd/karpenter/options"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/offline"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/simulate"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

// clusterInputs are the flags that say what offline admission knows of the cluster
// (docs/cli.md, "Admission offline"): the policies in force, the namespaces, what runs.
type clusterInputs struct {
	policies, namespaces, nodes paths
	maxException                time.Duration
	gates                       string
}

// register adds --policies, --namespaces and --max-exception-duration and --feature-gates;
// --nodes, --instance-types and --now are the command's own.
func (c *clusterInputs) register(fs *flag.FlagSet) {
	fs.Var(&c.policies, "policies", "CapacityPolicies, CapacityExceptions (and CapacityBudgets and Namespaces) the cluster has, beside those among the inputs: a file, a directory, git:REF[:DIR] or -; repeatable")
	fs.Var(&c.namespaces, "namespaces", "the cluster's Namespaces, for their labels (what an admission rule or a selector reads); repeatable")
	fs.DurationVar(&c.maxException, "max-exception-duration", validation.DefaultMaxExceptionDuration, "how far out a CapacityException may expire when written, as the manager's flag")
	fs.StringVar(&c.gates, "feature-gates", "", "the manager's feature gates, e.g. NodeOverlay=true (for the warnings of features that are off)")
}

// readPolicies reads --policies, each a file, a directory, git:REF[:DIR] or -.
func (c *clusterInputs) readPolicies(stdin io.Reader) ([]offline.Document, error) {
	var out []offline.Document
	for _, p := range c.policies {
		docs, err := offline.ReadSource(p, stdin)
		if err != nil {
			return nil, fmt.Errorf("--policies: %w", err)
		}
		out = append(out, docs...)
	}
	return out, nil
}

// admissionInputs are what offline admission is built from.
type admissionInputs struct {
	// inputs are the documents checked; clusterDocs those of --policies.
	inputs, clusterDocs []offline.Document
	// nodes are --nodes (nil when not given); workload the documents their usage needs
	// beyond nodes and pods (none for validate).
	nodes []offline.Document
	cat   *catalog.File
	conv  *conversion.Converter
	now   time.Time
	// existing are the cluster's objects (plan's base), nil when unknown.
	existing []runtime.Object
}

// admission builds offline admission from the flags and documents: the policies of
// --policies and the inputs, the labels of --namespaces and of the Namespaces among
// --policies and the inputs, the usage attributed over --nodes.
func (c *clusterInputs) admission(in admissionInputs, stdin io.Reader) (*offline.Admission, error) {
	gates, err := options.ParseFeatureGates(c.gates)
	if err != nil {
		return nil, fmt.Errorf("--feature-gates: %w", err)
	}
	facts := &offline.Cluster{Types: in.cat.ForProvider()}
	if len(c.namespaces) > 0 {
		nsDocs, err := offline.ReadPaths(c.namespaces, stdin)
		if err != nil {
			return nil, fmt.Errorf("--namespaces: %w", err)
		}
		for _, d := range nsDocs {
			if d.Object != nil && (d.GVK().Group != "" || d.GVK().Kind != "Namespace") {
				return nil, fmt.Errorf("--namespaces: %s:%d: %s is not a Namespace", d.File, d.Line, d.GVK().Kind)
			}
		}
		if err := facts.AddNamespaces(nsDocs); err != nil {
			return nil, fmt.Errorf("--namespaces: %w", err)
		}
		facts.AllNamespaces = true
	}
	if err := facts.AddNamespaces(in.clusterDocs); err != nil {
		return nil, fmt.Errorf("--policies: %w", err)
	}
	if err := facts.AddNamespaces(in.inputs); err != nil {
		return nil, err
	}
	if in.nodes != nil {
		sim := &simulate.Input{InstanceTypes: facts.Types}
		if err := loadSimulation(simSources{nodes: in.nodes}, sim, &simulate.DisruptInput{Now: in.now}, false, in.conv, in.now); err != nil {
			return nil, err
		}
		if facts.ByNamespace, err = simulate.Usage(sim, in.now); err != nil {
			return nil, fmt.Errorf("--nodes: %w", err)
		}
	}
	cluster, err := offline.LoadPolicies(in.clusterDocs)
	if err != nil {
		return nil, fmt.Errorf("--policies: %w", err)
	}
	inputs, err := offline.LoadPolicies(in.inputs)
	if err != nil {
		return nil, err
	}
	return offline.NewAdmission(offline.AdmissionSettings{Cluster: cluster, Inputs: inputs, Facts: facts, Now: in.now, Gates: gates, Existing: in.existing})
}
