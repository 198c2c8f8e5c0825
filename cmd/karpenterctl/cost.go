package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/live"
	"github.com/karpenter-policy/karpenter/scheduling/showback"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// costCmd is `karpenterctl cost`: what every namespace (or team, or NodePool) of a running
// cluster costs an hour, with the idle room apart, by the attribution the budgets use.
func costCmd(args []string, stdout, stderr io.Writer) int {
	fs, _, provider := newFlags("cost", stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster; default: $KUBECONFIG or ~/.kube/config")
	kubeContext := fs.String("context", "", "kubeconfig context; default: the current one")
	by := fs.String("by", "namespace", "group by namespace, team (the namespace label --team-label) or nodepool")
	teamLabel := fs.String("team-label", "team", "with --by team: the namespace label whose value names the team")
	instanceTypes := fs.String("instance-types", "", "instance-type catalog (JSON) to price every node by; default: the provider's (kwok: each NodePool's KWOKNodeClass catalog; aws: the built-in EC2 catalog)")
	overlays := fs.Bool("node-overlays", false, "apply the cluster's NodeOverlays to prices, as the manager does with its NodeOverlay feature gate on")
	output := fs.String("o", "text", "output format: text, json or csv")
	timeout := fs.Duration("timeout", time.Minute, "how long reading the cluster may take")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "karpenterctl cost: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	case *by != "namespace" && *by != "team" && *by != "nodepool":
		fmt.Fprintf(stderr, "karpenterctl cost: --by must be namespace, team or nodepool, got %q\n", *by)
		return exitUsage
	case *by == "team" && *teamLabel == "":
		fmt.Fprintln(stderr, "karpenterctl cost: --by team needs a --team-label")
		return exitUsage
	case *output != "text" && *output != "json" && *output != "csv":
		fmt.Fprintf(stderr, "karpenterctl cost: -o must be text, json or csv, got %q\n", *output)
		return exitUsage
	case *provider != "kwok" && *provider != "aws":
		fmt.Fprintf(stderr, "karpenterctl cost: --cloud-provider must be kwok or aws, got %q\n", *provider)
		return exitUsage
	}
	prices := &live.Prices{Provider: *provider}
	if *instanceTypes != "" {
		f, err := catalog.Load(*instanceTypes)
		if err != nil {
			fmt.Fprintln(stderr, "karpenterctl cost:", err)
			return exitUsage
		}
		prices.File = f
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, contextName, err := live.Connect(*kubeconfig, *kubeContext)
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl cost:", err)
		return exitUsage
	}
	prices.Reader = c
	objs, err := live.Objects(ctx, c, *overlays)
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl cost:", err)
		return exitUsage
	}
	// Each NodePool's instance types, resolved before the snapshot so that one that cannot be
	// priced is an error naming it rather than nodes silently unpriced.
	types := map[string][]*cloudprovider.InstanceType{}
	for _, np := range objs.NodePools {
		if types[np.Name], err = prices.InstanceTypes(ctx, np); err != nil {
			fmt.Fprintln(stderr, "karpenterctl cost:", err)
			return exitUsage
		}
	}
	snap := snapshot.Build(objs, snapshot.Env{Now: time.Now(), InstanceTypes: func(np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
		return types[np.Name], nil
	}})
	report := newCostReport(showback.Of(snap), snap.Namespaces(), *by, *teamLabel)
	report.Context, report.Prices = contextName, prices.Source(*instanceTypes)
	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
	case "csv":
		if err := writeCostCSV(stdout, report); err != nil {
			fmt.Fprintln(stderr, "karpenterctl cost:", err)
			return exitUsage
		}
	default:
		writeCostText(stdout, report)
	}
	return exitOK
}
