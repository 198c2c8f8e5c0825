// Command karpenterctl runs, offline and without a cluster, the checks and conversions the
// cluster runs, so that a pull request gets the cluster's verdict before merge:
//
//	karpenterctl validate -f PATH [-f PATH...] [--policies PATH] [--namespaces PATH] [--nodes PATH] [--now RFC3339] [-o text|json|github]
//	karpenterctl convert  -f PATH [-f PATH...] [--to v1|v1beta1] [--in-place]
//	karpenterctl simulate --nodepools PATH --workload PATH [--nodes PATH] [--instance-types FILE] [-o json|table|markdown]
//	karpenterctl plan     --base PATH --head PATH --workload PATH [--nodes PATH] [--policies PATH] [--max-increase AMOUNT] [--fail-on-blocked] [--fail-on-warn] [-o text|markdown|json|github|junit]
//	karpenterctl policy test PATH [PATH...] [--parameters FILE] [-v] [--coverage] [-o text|json|junit]
//	karpenterctl cost [--kubeconfig PATH] [--context NAME] [--by namespace|team|nodepool] [--team-label KEY] [-o text|json|csv]
//
// cost is the one command that reads a running cluster (read-only, through a kubeconfig).
//
// Exit status: 0 when everything is valid (or converted), 1 when something is invalid (a
// policy's admission rule denies it included), 2 on unreadable input or bad usage, 3 when a
// plan's CI gate fails.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/offline"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
)

// Exit statuses.
const (
	exitOK      = 0
	exitInvalid = 1
	exitUsage   = 2
)

func main() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// tuneGC trades memory for time, as suits a command that runs for seconds: the collector runs
// at four times the live heap rather than twice, and harder as the process nears 700 MiB, so
// that simulating 20 000 pods on the full EC2 catalog stays under 1 GiB (docs/benchmarks.md).
// GOGC and GOMEMLIMIT, when set, win.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(700 << 20)
	}
}

const usage = `karpenterctl: offline checks and conversions for Karpenter manifests, and the cost of a running cluster

Commands:
  validate -f PATH [-f PATH...] [--policies PATH] [--namespaces PATH] [--nodes PATH] [--now RFC3339] [-o text|json|github]
      Check every NodePool, NodeClaim, node class, CapacityBudget, CapacityPolicy and
      CapacityException against the CRDs' schemas and CEL rules, the webhook validators and
      the webhook's policy review (the inputs' and --policies' admission rules, at ci).
  convert -f PATH [-f PATH...] [--to v1|v1beta1] [--in-place]
      Convert NodePool, NodeClaim and EC2NodeClass documents to one version.
  simulate --nodepools PATH --workload PATH [--nodes PATH] [--instance-types FILE] [-o json|table|markdown]
      Show the NodeClaims the provisioner would launch for the workloads, and their cost.
  plan --base PATH --head PATH --workload PATH [--nodes PATH] [--policies PATH] [--instance-types FILE] [--now RFC3339]
       [--max-increase AMOUNT|PCT%] [--fail-on-blocked] [--fail-on-warn] [-o text|markdown|json|github|junit]
      What a change costs before it merges: validate the head, simulate both sides with
      their policies on the same workload, and report the difference; the gates exit 3.
      --base, --head and --policies may be git:REF[:DIR], read from the working
      directory's Git repository.
  policy test PATH [PATH...] [--parameters FILE] [-v] [--coverage] [-o text|json|junit]
      Run the test_ rules of .rego files and CapacityPolicy manifests, as 'opa test' does.
  cost [--kubeconfig PATH] [--context NAME] [--by namespace|team|nodepool] [--team-label KEY]
       [--instance-types FILE] [--node-overlays] [-o text|json|csv]
      What every namespace, team or NodePool of a running cluster costs an hour, by the
      attribution the budgets use, with the idle room apart; it only reads the cluster.

PATH is a file, a directory (searched recursively for .yaml, .yml and .json) or - for
standard input, holding multi-document YAML such as kustomize build or helm template print.
Run 'karpenterctl COMMAND -h' for a command's flags.
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "validate":
		return validate(args[1:], stdin, stdout, stderr)
	case "convert":
		return convert(args[1:], stdin, stdout, stderr)
	case "simulate":
		return simulateCmd(args[1:], stdin, stdout, stderr)
	case "policy":
		return policyCmd(args[1:], stdout, stderr)
	case "plan":
		return planCmd(args[1:], stdin, stdout, stderr)
	case "cost":
		return costCmd(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "karpenterctl: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// paths is a repeatable -f flag.
type paths []string

func (p *paths) String() string     { return strings.Join(*p, ",") }
func (p *paths) Set(v string) error { *p = append(*p, v); return nil }

func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *paths, *string) {
	fs := flag.NewFlagSet("karpenterctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files paths
	fs.Var(&files, "f", "file, directory or - (standard input); repeatable")
	fs.Var(&files, "filename", "same as -f")
	provider := fs.String("cloud-provider", "kwok", "the cluster's cloud provider (kwok or aws): a v1beta1 nodeClassRef without kind means its node class")
	return fs, &files, provider
}

func newValidator(provider string) (*offline.Validator, error) {
	conv := &conversion.Converter{DefaultNodeClass: conversion.KWOKNodeClass}
	switch provider {
	case "kwok":
	case "aws":
		conv.DefaultNodeClass = conversion.EC2NodeClass
	default:
		return nil, fmt.Errorf("--cloud-provider must be kwok or aws, got %q", provider)
	}
	return offline.NewValidator(conv)
}

func validate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, files, provider := newFlags("validate", stderr)
	output := fs.String("o", "text", "output format: text, json or github (workflow commands)")
	var cluster clusterInputs
	cluster.register(fs)
	fs.Var(&cluster.nodes, "nodes", "the cluster's Nodes with the Pods bound to them, for each namespace's usage (what a budget's admission rules read); repeatable")
	instanceTypes := fs.String("instance-types", "", "instance-type catalog (JSON) that prices --nodes and NodePool limits; default: the kwok provider's embedded catalog")
	nowFlag := fs.String("now", "", "the time admission is evaluated at (RFC 3339): CapacityExceptions' expiry, budgets' windows; default: now")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if len(*files) == 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "karpenterctl validate: give one or more -f PATH, and nothing else")
		return exitUsage
	}
	switch *output {
	case "text", "json", "github":
	default:
		fmt.Fprintf(stderr, "karpenterctl validate: -o must be text, json or github, got %q\n", *output)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "karpenterctl validate:", err)
		return exitUsage
	}
	conv, cat, now, err := simulationSettings(*provider, *instanceTypes, *nowFlag)
	if err != nil {
		return fail(err)
	}
	v, err := newValidator(*provider)
	if err != nil {
		return fail(err)
	}
	v.Webhooks.Now, v.Webhooks.MaxExceptionDuration = func() time.Time { return now }, cluster.maxException
	docs, err := offline.ReadPaths(*files, stdin)
	if err != nil {
		return fail(err)
	}
	clusterDocs, err := cluster.readPolicies(stdin)
	if err != nil {
		return fail(err)
	}
	var nodes []offline.Document
	if len(cluster.nodes) > 0 {
		if nodes, err = offline.ReadPaths(cluster.nodes, stdin); err != nil {
			return fail(fmt.Errorf("--nodes: %w", err))
		}
		nodes = append([]offline.Document{}, nodes...)
	}
	if v.Admission, err = cluster.admission(admissionInputs{inputs: docs, clusterDocs: clusterDocs, nodes: nodes, cat: cat, conv: conv, now: now}, stdin); err != nil {
		return fail(err)
	}
	report := v.Validate(context.Background(), docs)
	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
	case "github":
		writeProblemsGitHub(stdout, report.Problems)
		for _, p := range report.Warnings {
			fmt.Fprintf(stdout, "::warning file=%s,line=%d::%s\n", p.File, p.Line, escapeWorkflow(located(p)))
		}
		for _, p := range report.Undecided {
			fmt.Fprintf(stdout, "::warning file=%s,line=%d,title=undecided offline::%s\n", p.File, p.Line, escapeWorkflow(located(p)))
		}
		for _, p := range report.Notes {
			fmt.Fprintf(stdout, "::notice file=%s,line=%d::%s\n", p.File, p.Line, escapeWorkflow(located(p)))
		}
		fmt.Fprintln(stdout, summary(report))
	default:
		for _, p := range report.Problems {
			fmt.Fprintln(stdout, p.String())
		}
		for _, p := range report.Warnings {
			fmt.Fprintln(stdout, "warning: "+p.String())
		}
		for _, p := range report.Undecided {
			fmt.Fprintln(stdout, "undecided: "+p.String())
		}
		for _, p := range report.Notes {
			fmt.Fprintln(stdout, "note: "+p.String())
		}
		if len(report.UnknownInputs) > 0 {
			fmt.Fprintln(stdout, "not known offline: "+strings.Join(report.UnknownInputs, "; "))
		}
		fmt.Fprintln(stdout, summary(report))
	}
	if report.Invalid > 0 {
		return exitInvalid
	}
	return exitOK
}

func summary(r offline.Report) string {
	out := fmt.Sprintf("%d objects: %d valid, %d invalid (%d problems); %d documents of other kinds skipped",
		r.Objects, r.Valid, r.Invalid, len(r.Problems), r.Skipped)
	if len(r.Warnings) > 0 {
		out += fmt.Sprintf("; %d warnings", len(r.Warnings))
	}
	if len(r.Undecided) > 0 {
		out += fmt.Sprintf("; %d policy rules undecided offline", len(r.Undecided))
	}
	return out
}

// located is a problem without its file and line, for a workflow command that carries them.
func located(p offline.Problem) string {
	if p.Field == "" {
		return fmt.Sprintf("%s/%s: %s", p.Kind, p.Name, p.Message)
	}
	return fmt.Sprintf("%s/%s: %s: %s", p.Kind, p.Name, p.Field, p.Message)
}

// writeProblemsGitHub writes each problem as a GitHub Actions error annotation on its line.
func writeProblemsGitHub(w io.Writer, problems []offline.Problem) {
	for _, p := range problems {
		fmt.Fprintf(w, "::error file=%s,line=%d::%s\n", p.File, p.Line, escapeWorkflow(located(p)))
	}
}

// escapeWorkflow escapes a GitHub Actions workflow command's message.
func escapeWorkflow(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func convert(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, files, provider := newFlags("convert", stderr)
	to := fs.String("to", "v1", "target version: v1 or v1beta1")
	inPlace := fs.Bool("in-place", false, "rewrite the files instead of printing the result")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if len(*files) == 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "karpenterctl convert: give one or more -f PATH, and nothing else")
		return exitUsage
	}
	if *to != "v1" && *to != "v1beta1" {
		fmt.Fprintf(stderr, "karpenterctl convert: --to must be v1 or v1beta1, got %q\n", *to)
		return exitUsage
	}
	v, err := newValidator(*provider)
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl convert:", err)
		return exitUsage
	}
	docs, err := offline.ReadPaths(*files, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl convert:", err)
		return exitUsage
	}
	if *inPlace {
		for _, f := range *files {
			if f == "-" {
				fmt.Fprintln(stderr, "karpenterctl convert: --in-place cannot rewrite standard input")
				return exitUsage
			}
		}
	}
	n, notes, err := v.Convert(context.Background(), docs, *to)
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl convert:", err)
		var readErr *offline.ReadError
		if errors.As(err, &readErr) {
			return exitUsage
		}
		return exitInvalid
	}
	byFile := map[string][]offline.Document{}
	var order []string
	for _, d := range docs {
		if _, seen := byFile[d.File]; !seen {
			order = append(order, d.File)
		}
		byFile[d.File] = append(byFile[d.File], d)
	}
	for i, f := range order {
		out := offline.Join(byFile[f])
		if *inPlace {
			info, err := os.Stat(f)
			if err != nil {
				fmt.Fprintln(stderr, "karpenterctl convert:", err)
				return exitUsage
			}
			if err := os.WriteFile(f, out, info.Mode().Perm()); err != nil {
				fmt.Fprintln(stderr, "karpenterctl convert:", err)
				return exitUsage
			}
			continue
		}
		if len(order) > 1 {
			if i > 0 {
				fmt.Fprintln(stdout, "---")
			}
			fmt.Fprintf(stdout, "# Source: %s\n", f)
		}
		_, _ = stdout.Write(out)
	}
	for _, note := range notes {
		fmt.Fprintln(stderr, note.String())
	}
	fmt.Fprintf(stderr, "karpenterctl convert: %d documents converted to %s\n", n, *to)
	return exitOK
}
