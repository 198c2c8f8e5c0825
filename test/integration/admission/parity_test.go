// Package admission_test feeds the same objects to the validating webhook, served to a real
// kube-apiserver, and to `karpenterctl validate`, and compares their verdicts and messages:
// one policy review (webhooks/admission) for both, so that a pull request learns before merge
// what the cluster says after sync.
package admission_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	policycontrollers "github.com/karpenter-policy/karpenter/controllers/policy"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/providers/kwok"
	"github.com/karpenter-policy/karpenter/test/env"
	"github.com/karpenter-policy/karpenter/webhooks"
	"github.com/karpenter-policy/karpenter/webhooks/admission"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

var (
	testEnv *env.Environment
	engine  *policies.Engine
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts the API server with the webhook configuration, and a manager serving the
// webhooks with the policy review as the manager wires it: the engine fed by the
// CapacityPolicies in the API server, usage from the cluster model, the kwok provider.
func run(m *testing.M) int {
	var err error
	testEnv, err = env.Start(env.WithWebhooks(envtest.WebhookInstallOptions{
		Paths: []string{filepath.Join(env.RepoRoot(), "config", "webhook", "manifests.yaml")},
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = testEnv.Stop() }()
	w := testEnv.WebhookInstallOptions()
	mgr, err := ctrl.NewManager(testEnv.Config, ctrl.Options{Scheme: testEnv.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir})})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if engine, err = policies.NewEngine(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cloud := kwok.New(mgr.GetClient(), clock.RealClock{}, 1)
	cluster := state.NewCluster(mgr.GetClient(), clock.RealClock{})
	if err := cluster.Register(context.Background(), mgr.GetCache()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	facts := &webhooks.ClusterFacts{Client: mgr.GetClient(), Cloud: cloud, Attribution: state.NewAttribution(cluster, cloud, clock.RealClock{})}
	review := webhooks.NewClusterReview(admission.New(engine, facts, time.Now))
	if err := webhooks.Register(mgr, &conversion.Converter{DefaultNodeClass: conversion.KWOKNodeClass}, validation.New(), review); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := policycontrollers.NewEngineSync(mgr.GetClient(), engine).Register(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	addr := net.JoinHostPort(w.LocalServingHost, strconv.Itoa(w.LocalServingPort))
	for deadline := time.Now().Add(30 * time.Second); ; {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe only
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "webhook server did not start:", err)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
	return m.Run()
}

// The cluster: namespaces with labels, the kwok node class, and the policies.
const namespaces = `apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {tier: prod}}
---
apiVersion: v1
kind: Namespace
metadata: {name: lab, labels: {tier: dev}}
`

const clusterObjects = `apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
`

const policiesYAML = `apiVersion: policy.karpenter.sh/v1
kind: CapacityPolicy
metadata: {name: max-cpu}
spec:
  enforcement: Deny
  modules:
  - name: max-cpu.rego
    rego: |
      package karpenter.admission

      deny contains {"msg": msg, "rule": "max-cpu"} if {
        input.kind == "NodePool"
        units.parse(input.object.spec.limits.cpu) > 500
        msg := sprintf("NodePool %s: cpu limit %s is over 500", [input.object.metadata.name, input.object.spec.limits.cpu])
      }

      warn contains msg if {
        input.kind == "NodePool"
        not input.object.spec.limits.cpu
        msg := sprintf("NodePool %s has no cpu limit in Git", [input.object.metadata.name])
      }
---
apiVersion: policy.karpenter.sh/v1
kind: CapacityPolicy
metadata: {name: prod-budgets}
spec:
  namespaceSelector: {matchLabels: {tier: prod}}
  modules:
  - name: prod.rego
    rego: |
      package karpenter.admission

      deny contains sprintf("a prod namespace's budget needs an hourlyCost (namespace %s)", [input.namespace.name]) if {
        input.kind == "CapacityBudget"
        not input.object.spec.limits.hourlyCost
      }
---
apiVersion: policy.karpenter.sh/v1
kind: CapacityPolicy
metadata: {name: dev-spot}
spec:
  enforcement: DryRun
  namespaceSelector: {matchLabels: {tier: dev}}
  modules:
  - name: spot.rego
    rego: |
      package karpenter.admission

      deny contains "dev budgets should require Spot" if {
        input.kind == "CapacityBudget"
        not input.object.spec.spot.minPercent
      }
`

// The objects under review, in the order they are applied.
const objectsYAML = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: big}
spec:
  limits: {cpu: "600"}
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: small}
spec:
  limits: {cpu: "400"}
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: open}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
---
apiVersion: policy.karpenter.sh/v1
kind: CapacityBudget
metadata: {name: default, namespace: shop}
spec:
  limits: {monthlyCost: "900"}
---
apiVersion: policy.karpenter.sh/v1
kind: CapacityBudget
metadata: {name: default, namespace: lab}
spec:
  limits: {hourlyCost: "1.00"}
  spot: {maxPercent: 100}
`

// verdict is what one side said of one object: its denials and its warnings, as the webhook
// words them.
type verdict struct {
	denied   bool
	denials  []string
	warnings []string
}

func (v verdict) String() string {
	return fmt.Sprintf("denied %v: %q; warnings %q", v.denied, v.denials, v.warnings)
}

type warningCollector struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

func decode(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(text, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func TestWebhookAndCLIGiveTheSameVerdicts(t *testing.T) {
	ctx := context.Background()
	for _, o := range append(append(decode(t, namespaces), decode(t, clusterObjects)...), decode(t, policiesYAML)...) {
		if err := testEnv.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), o) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(engine.Policies()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the engine has %v", engine.Policies())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The webhook's verdicts: each object applied through the API server.
	warnings := &warningCollector{}
	cfg := rest.CopyConfig(testEnv.Config)
	cfg.WarningHandler = warnings
	c, err := client.New(cfg, client.Options{Scheme: testEnv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	objects := decode(t, objectsYAML)
	cluster := map[string]verdict{}
	for _, o := range objects {
		err := c.Create(ctx, o)
		v := verdict{warnings: warnings.take()}
		switch {
		case apierrors.IsForbidden(err):
			v.denied = true
			_, list, _ := strings.Cut(err.Error(), "denied by policy: ")
			v.denials = strings.Split(list, "; ")
		case err != nil:
			t.Fatalf("creating %s: %v", o.GetName(), err)
		default:
			t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), o) })
		}
		cluster[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = v
	}

	// karpenterctl's verdicts on the same objects, with the cluster's policies, namespaces and
	// (empty) nodes as its inputs.
	dir := t.TempDir()
	files := map[string]string{"objects.yaml": objectsYAML, "policies.yaml": policiesYAML, "namespaces.yaml": namespaces, "nodes.yaml": ""}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "karpenterctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/karpenterctl")
	build.Dir = env.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building karpenterctl: %v\n%s", err, out)
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, "validate", "-f", filepath.Join(dir, "objects.yaml"), "--policies", filepath.Join(dir, "policies.yaml"),
		"--namespaces", filepath.Join(dir, "namespaces.yaml"), "--nodes", filepath.Join(dir, "nodes.yaml"), "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run()
	var report struct {
		Problems, Warnings, Notes, Undecided []struct {
			Line                      int
			Kind, Name, Field, Policy string
			Message                   string
		}
	}
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("%v: %s%s", err, out.String(), errOut.String())
	}
	if len(report.Undecided) != 0 {
		t.Errorf("with the cluster's inputs given, nothing is undecided: %+v", report.Undecided)
	}
	// Documents start at lines 1, 10, 19, 27, 33 of objects.yaml.
	keyAt := map[int]string{}
	line := 1
	for i, doc := range strings.Split(objectsYAML, "\n---\n") {
		keyAt[line] = objects[i].GetKind() + "/" + objects[i].GetNamespace() + "/" + objects[i].GetName()
		line += strings.Count(doc, "\n") + 2
	}
	cli := map[string]verdict{}
	for k := range cluster {
		cli[k] = verdict{}
	}
	// The CLI names a policy and its message; the webhook words a denial "SOURCE: MESSAGE",
	// and a warning as the message (a dry run prefixed, a field not acted on with its kind,
	// name and field).
	source := func(policy string) string {
		if strings.HasPrefix(policy, "CapacityBudget ") {
			return policy
		}
		return "CapacityPolicy " + policy
	}
	for _, p := range report.Problems {
		k := keyAt[p.Line]
		v := cli[k]
		v.denied = true
		v.denials = append(v.denials, source(p.Policy)+": "+p.Message)
		cli[k] = v
	}
	for _, p := range append(report.Warnings, report.Notes...) {
		k := keyAt[p.Line]
		v := cli[k]
		msg := p.Message
		if p.Field != "" && !strings.HasPrefix(p.Field, "policy ") {
			msg = fmt.Sprintf("%s %s: %s: %s", p.Kind, p.Name, p.Field, p.Message)
		}
		v.warnings = append(v.warnings, msg)
		cli[k] = v
	}
	for k, want := range cluster {
		got := cli[k]
		slices.Sort(want.denials)
		slices.Sort(got.denials)
		slices.Sort(want.warnings)
		slices.Sort(got.warnings)
		if got.denied != want.denied || !slices.Equal(got.denials, want.denials) || !slices.Equal(got.warnings, want.warnings) {
			t.Errorf("%s:\n  webhook:      %s\n  karpenterctl: %s", k, want, got)
		}
	}
	// The verdicts are the ones the policies give.
	for k, denied := range map[string]bool{"NodePool//big": true, "NodePool//small": false, "NodePool//open": false,
		"CapacityBudget/shop/default": true, "CapacityBudget/lab/default": false} {
		if cluster[k].denied != denied {
			t.Errorf("%s: denied %v, want %v (%s)", k, cluster[k].denied, denied, cluster[k])
		}
	}
	if w := cluster["CapacityBudget/lab/default"].warnings; !slices.Contains(w, "dry run, would deny: dev budgets should require Spot") {
		t.Errorf("the DryRun policy's result: %q", w)
	}
}
