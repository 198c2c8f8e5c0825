// Package charts checks the Helm charts as a user installs them: helm (v3.22.0, built by
// hack/helm.sh) lints them, renders the controller chart with its default values and each
// documented variant, and the API server (envtest, with this project's CRDs and the
// third-party ones the variants use) accepts every rendered object by server-side dry-run.
package charts

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/karpenter-policy/karpenter/test/env"
)

var (
	testEnv *env.Environment
	helm    string
)

func TestMain(m *testing.M) {
	root := env.RepoRoot()
	out, err := exec.Command(filepath.Join(root, "hack", "helm.sh")).Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building helm:", err)
		os.Exit(1)
	}
	helm = strings.TrimSpace(string(out))
	out, err = exec.Command(filepath.Join(root, "hack", "third-party-crds.sh")).Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "third-party CRDs:", err)
		os.Exit(1)
	}
	thirdParty := strings.TrimSpace(string(out))
	os.Exit(env.Run(m, &testEnv, func(e *envtest.Environment) { e.CRDDirectoryPaths = append(e.CRDDirectoryPaths, thirdParty) }))
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Dir = env.RepoRoot()
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), err
	}
	return out.String(), nil
}

// variants are the documented ways to install the controller chart (docs/chart.md).
var variants = map[string][]string{
	"default":             nil,
	"aws":                 {"--set", "cloudProvider=aws,aws.clusterName=prod,aws.clusterEndpoint=https://example.eks.amazonaws.com,aws.interruptionQueue=prod", "--set", "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::123456789012:role/karpenter"},
	"cert-manager":        {"--set", "webhook.certMode=cert-manager"},
	"cert-manager-issuer": {"--set", "webhook.certMode=cert-manager,webhook.certManager.issuerRef.name=platform-ca,webhook.certManager.issuerRef.kind=ClusterIssuer"},
	"self-signed":         {"--set", "webhook.certMode=self-signed"},
	"monitoring":          {"--set", "metrics.serviceMonitor.enabled=true,dashboard.enabled=true,policy.prometheusRules.enabled=true"},
	"upstream":            {"-f", "test/integration/charts/testdata/upstream-v1.14-values.yaml"},
}

func render(t *testing.T, chart string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := run(t, append([]string{"template", "karpenter", chart, "--namespace", "karpenter"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %s %v: %v\n%s", chart, args, err, out)
	}
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := r.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	if len(objs) == 0 {
		t.Fatalf("helm template %s %v rendered nothing", chart, args)
	}
	return objs
}

func TestChartsLint(t *testing.T) {
	for _, chart := range []string{"charts/karpenter", "charts/karpenter-crd"} {
		if out, err := run(t, "lint", "--strict", chart); err != nil {
			t.Errorf("helm lint %s: %v\n%s", chart, err, out)
		}
	}
	for name, args := range variants {
		if out, err := run(t, append([]string{"lint", "--strict", "charts/karpenter"}, args...)...); err != nil {
			t.Errorf("helm lint with %s: %v\n%s", name, err, out)
		}
	}
}

// applyDryRun has the API server accept the objects as they are (server-side dry-run).
func applyDryRun(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		data, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := testEnv.Client.Patch(context.Background(), u, client.RawPatch(types.ApplyPatchType, data), client.DryRunAll, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// Every variant renders objects the API server accepts as they are (server-side dry-run).
func TestEveryVariantIsAcceptedByTheAPIServer(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "karpenter"}}
	if err := testEnv.Client.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	apply := applyDryRun
	t.Run("karpenter-crd", func(t *testing.T) {
		objs := render(t, "charts/karpenter-crd", "--set", "webhook.certManager.enabled=true")
		for _, u := range objs {
			if u.GetAnnotations()["cert-manager.io/inject-ca-from"] != "karpenter/karpenter-webhook" {
				t.Errorf("CRD %s: cert-manager.io/inject-ca-from = %q, want the controller chart's Certificate", u.GetName(), u.GetAnnotations()["cert-manager.io/inject-ca-from"])
			}
		}
		apply(t, objs)
	})
	// A controller outside the cluster (make run-argocd): conversion at webhook.url.
	t.Run("karpenter-crd-url", func(t *testing.T) {
		objs := render(t, "charts/karpenter-crd", "--set", "webhook.url=https://127.0.0.1:9443/")
		converted := 0
		for _, u := range objs {
			cc, found, _ := unstructured.NestedMap(u.Object, "spec", "conversion", "webhook", "clientConfig")
			if !found {
				continue
			}
			converted++
			if cc["url"] != "https://127.0.0.1:9443/convert" || cc["service"] != nil {
				t.Errorf("CRD %s: conversion clientConfig %v, want only url https://127.0.0.1:9443/convert", u.GetName(), cc)
			}
		}
		if converted != 3 {
			t.Errorf("%d CRDs with a conversion webhook, want 3 (NodePool, NodeClaim, EC2NodeClass)", converted)
		}
		apply(t, objs)
	})
	for name, args := range variants {
		t.Run(name, func(t *testing.T) {
			objs := render(t, "charts/karpenter", args...)
			kinds := map[string]int{}
			for _, u := range objs {
				kinds[u.GetKind()]++
			}
			switch name {
			case "cert-manager":
				if kinds["Certificate"] != 2 || kinds["Issuer"] != 2 {
					t.Errorf("cert-manager without an issuer: %v; want a CA Certificate and Issuer, and the webhook's Certificate", kinds)
				}
			case "cert-manager-issuer":
				if kinds["Certificate"] != 1 || kinds["Issuer"] != 0 {
					t.Errorf("cert-manager with an issuer: %v; want only the webhook's Certificate", kinds)
				}
			case "monitoring":
				if kinds["ServiceMonitor"] != 1 || kinds["ConfigMap"] != 1 || kinds["PrometheusRule"] != 1 {
					t.Errorf("monitoring: %v; want a ServiceMonitor, the dashboard ConfigMap and the PrometheusRule", kinds)
				}
			}
			apply(t, objs)
		})
	}
}

// The controller's RBAC is least privilege: no wildcard anywhere, and of the kinds Git owns
// it writes only status, the finalizer of EC2NodeClasses (for its cleanup) and the hash
// annotations of NodePools (karpenter.sh/nodepool-hash and -hash-version, as upstream; a
// merge patch of metadata alone, which ArgoCD does not count as a difference from Git).
func TestRBACIsLeastPrivilege(t *testing.T) {
	gitOwned := map[string]bool{"nodepools": true, "ec2nodeclasses": true, "kwoknodeclasses": true, "capacitybudgets": true, "capacitypolicies": true}
	for _, u := range render(t, "charts/karpenter") {
		if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
			continue
		}
		var rules struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rules); err != nil {
			t.Fatal(err)
		}
		for _, r := range rules.Rules {
			for _, list := range [][]string{r.Verbs, r.Resources, r.APIGroups} {
				for _, v := range list {
					if v == "*" {
						t.Errorf("%s %s: a wildcard in %+v", u.GetKind(), u.GetName(), r)
					}
				}
			}
			if u.GetName() != "karpenter" {
				continue
			}
			for _, res := range r.Resources {
				if !gitOwned[res] {
					continue
				}
				for _, v := range r.Verbs {
					metadata := (res == "ec2nodeclasses" || res == "nodepools") && v == "patch"
					if v != "get" && v != "list" && v != "watch" && !metadata {
						t.Errorf("the controller may %s %s, which Git owns; it may write only their status", v, res)
					}
				}
			}
		}
	}
}

// A value the schema does not know, or of the wrong type, fails the install naming the key.
func TestBadValuesNameTheKey(t *testing.T) {
	for args, want := range map[string]string{
		"replica=3":            "additional properties 'replica' not allowed",
		"cloudProvider=gcp":    "/cloudProvider",
		"webhook.port=0":       "/webhook/port",
		"webhook.certMode=acm": "/webhook/certMode",
		"cloudProvider=aws":    "settings.clusterName is required",
	} {
		out, err := run(t, "template", "karpenter", "charts/karpenter", "--set", args)
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("--set %s: %v; want an error naming %q:\n%s", args, err, want, out)
		}
	}
}
