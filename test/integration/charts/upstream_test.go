package charts

import (
	"context"
	"flag"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-policy/karpenter/cmd/karpenter/options"
)

// An upstream v1.14 values file installs unchanged: the API server accepts everything it
// renders, the settings reach the manager as upstream's environment variables, and the
// manager accepts them, upstream's FEATURE_GATES included.
func TestUpstreamValuesInstallUnchanged(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "karpenter"}}
	if err := testEnv.Client.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	objs := render(t, "charts/karpenter", "-f", "test/integration/charts/testdata/upstream-v1.14-values.yaml")
	applyDryRun(t, objs)

	var d appsv1.Deployment
	kinds := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		kinds[u.GetKind()] = u
		if u.GetKind() == "Deployment" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if kinds["PodDisruptionBudget"] == nil || kinds["PodDisruptionBudget"].GetName() != "karpenter" {
		t.Errorf("podDisruptionBudget.name: %v", kinds["PodDisruptionBudget"])
	}
	if sm := kinds["ServiceMonitor"]; sm == nil || sm.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("serviceMonitor with its additionalLabels: %v", sm)
	} else if eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints"); len(eps) != 1 || eps[0].(map[string]any)["interval"] != "15s" || eps[0].(map[string]any)["metricRelabelings"] == nil {
		t.Errorf("serviceMonitor endpoint without endpointConfig or metricRelabelings: %v", eps)
	}
	if d.Labels["team"] != "platform" || d.Annotations["owner"] != "platform" {
		t.Errorf("additionalLabels and additionalAnnotations: %v %v", d.Labels, d.Annotations)
	}
	if len(d.Spec.Template.Spec.Tolerations) != 1 || d.Spec.Template.Spec.Tolerations[0].Key != "CriticalAddonsOnly" {
		t.Errorf("tolerations: %v", d.Spec.Template.Spec.Tolerations)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--cloud-provider=aws") {
		t.Errorf("settings.clusterName selects the AWS provider: %v", c.Args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	for k, want := range map[string]string{
		"FEATURE_GATES":      "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=true,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false,TerminateFirstDrift=false,TerminateFirstRepair=false,PodDeletionCostManagement=false",
		"CLUSTER_NAME":       "prod",
		"CLUSTER_ENDPOINT":   "https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
		"INTERRUPTION_QUEUE": "prod",
		"AWS_REGION":         "eu-west-1",
		"BATCH_MAX_DURATION": "10s",
		"RESERVED_ENIS":      "0",
		"METRICS_PORT":       "8080",
	} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}
	// The manager starts on what the chart passes it.
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("MEMORY_LIMIT", "1073741824") // the chart's resourceFieldRef, as the kubelet resolves it
	o, err := options.Parse(flag.NewFlagSet("karpenter", flag.ContinueOnError), c.Args)
	if err != nil {
		t.Fatalf("the manager refuses the chart's settings: %v", err)
	}
	if o.CloudProvider != "aws" || o.ClusterName != "prod" || !o.Gates["SpotToSpotConsolidation"] || o.Gates["StaticCapacity"] || o.MetricsBindAddress != ":8080" {
		t.Errorf("the manager read %+v", o)
	}
}

// Upstream settings asking for what is not built fail the install, naming the value.
func TestUpstreamValuesNotBuiltAreRefused(t *testing.T) {
	for set, want := range map[string]string{
		"settings.eksControlPlane=true":              "settings.eksControlPlane=true",
		"settings.enableZonalShift=true":             "settings.enableZonalShift=true",
		"settings.awsFeatureGates.nodeClassCEL=true": "nodeClassCEL=true",
		"settings.amiRefreshInterval=5m":             "settings.amiRefreshInterval",
		"settings.clusterName=,cloudProvider=aws":    "settings.clusterName is required",
	} {
		out, err := run(t, "template", "karpenter", "charts/karpenter", "--set", set)
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("--set %s: want a failure naming %q, got %v\n%s", set, want, err, out)
		}
	}
}
