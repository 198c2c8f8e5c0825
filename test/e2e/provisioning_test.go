// Package e2e runs the manager against the local cluster of `make run` (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok), started by the test
// itself, and checks what a user would see: pending pods get nodes and run.
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/test/cluster"
	"github.com/karpenter-policy/karpenter/test/env"
)

var (
	local       *cluster.Cluster
	kube        client.Client
	metricsPort int
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The client logs the API server's warnings (webhook admission warnings among them).
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))
	bins := os.Getenv("KUBEBUILDER_ASSETS")
	if bins == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run the suite with 'make e2e'")
		return 1
	}
	dir, err := os.MkdirTemp("", "karpenter-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	var ports cluster.ManagerPorts
	// Node repair, NodeOverlays, CapacityBuffers and terminate-first drift are behind their
	// feature gates; the suite tests them (TestNodeRepair, TestNodeOverlay*,
	// TestCapacityBuffer*, TestStaticTerminateFirstAtTheNodeLimit).
	gates := func(string) ([]string, []string) {
		return []string{"--feature-gates=NodeRepair=true,NodeOverlay=true,CapacityBuffer=true,TerminateFirstDrift=true"}, nil
	}
	if local, ports, err = cluster.StartWithManager(ctx, cluster.ManagedOptions{Dir: dir, BinDir: bins, RepoRoot: env.RepoRoot(), Provider: gates}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	metricsPort = ports.Metrics
	defer func() {
		if err := local.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	if kube, err = client.New(local.Config, client.Options{Scheme: install.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := cluster.Apply(ctx, local.Config, filepath.Join(env.RepoRoot(), "config", "samples")); err != nil {
		fmt.Fprintln(os.Stderr, "applying the samples:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "manager log:\n"+local.LogTail("karpenter", 40))
	}
	return code
}

// Scaling the sample Deployment, with two more of other sizes (200 pods of mixed sizes in
// all), gets every pod a node launched by the provisioner, and no NodeClaim is left unused.
func TestScaleUpRunsEveryPod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	deploy := &appsv1.Deployment{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "inflate"}, deploy); err != nil {
		t.Fatal(err)
	}
	const replicas = 200
	// The pods are karpenter.sh/do-not-disrupt while the test looks: it checks what
	// provisioning launched, and the spot NodePool's consolidateAfter (1m) lets consolidation
	// move pods once they have run a minute, which a slow machine's scale-up can outlast (CI
	// once took 73 s): a legitimate consolidation would be counted as a launch for nothing.
	scale := func(ctx context.Context, n int32, protect bool) error {
		patch := client.MergeFrom(deploy.DeepCopy())
		deploy.Spec.Replicas = ptr.To(n)
		if protect {
			deploy.Spec.Template.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		} else {
			delete(deploy.Spec.Template.Annotations, karpv1.DoNotDisruptAnnotationKey)
		}
		return kube.Patch(ctx, deploy, patch)
	}
	start := time.Now()
	if err := scale(ctx, 100, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = scale(context.Background(), 0, false) })
	for _, d := range []*appsv1.Deployment{mixed("inflate-small", 60, "250m", "512Mi"), mixed("inflate-large", 40, "2", "4Gi")} {
		d.Spec.Template.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		if err := kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), d) })
	}
	var pods corev1.PodList
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.HasLabels{"inflate"}); err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == replicas, nil
	}); err != nil {
		t.Fatalf("not every pod is Running: %v\n%s", err, local.LogTail("karpenter", 20))
	}
	t.Logf("%d pods Running %.1fs after the scale-up", replicas, time.Since(start).Seconds())

	var claims karpv1.NodeClaimList
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := kube.List(ctx, &claims); err != nil {
			return false, nil
		}
		for _, nc := range claims.Items {
			if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeReady) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		for _, nc := range claims.Items {
			if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeReady) {
				t.Errorf("NodeClaim %s is not Ready: %+v", nc.Name, nc.Status.Conditions)
			}
		}
	}
	byNode := map[string]*karpv1.NodeClaim{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		byNode[nc.Status.NodeName] = nc
	}
	used := map[string]bool{}
	// The NodeClaims and nodes a failure is about: the manager's lines about them tell what
	// happened to each (a disruption, a repair, a registration that never came).
	var suspects []string
	for _, p := range pods.Items {
		nc, ok := byNode[p.Spec.NodeName]
		if !ok {
			t.Errorf("pod %s runs on %s, which no NodeClaim launched", p.Name, p.Spec.NodeName)
			suspects = append(suspects, p.Spec.NodeName)
			continue
		}
		used[nc.Name] = true
		node := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			t.Fatal(err)
		}
		if node.Labels[karpv1.NodePoolLabelKey] == "" || node.Labels[karpv1.LabelInstanceType] != nc.Labels[karpv1.LabelInstanceType] {
			t.Errorf("node %s: labels %v do not match its NodeClaim's", node.Name, node.Labels)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == karpv1.UnregisteredTaintKey {
				t.Errorf("node %s still has the unregistered taint", node.Name)
			}
		}
	}
	for _, nc := range claims.Items {
		if !used[nc.Name] {
			t.Errorf("NodeClaim %s (%s) runs none of the pods: launched for nothing", nc.Name, nc.Labels[karpv1.LabelInstanceType])
			suspects = append(suspects, nc.Name)
		}
	}
	t.Logf("%d NodeClaims for %d pods", len(claims.Items), replicas)
	if t.Failed() {
		// Where the pods went and when each NodeClaim was made tell an off-plan binding from
		// a batch that launched twice.
		perNode := map[string]int{}
		for _, p := range pods.Items {
			perNode[p.Spec.NodeName]++
		}
		for _, nc := range claims.Items {
			t.Logf("NodeClaim %s: %s, created %s, %d pods", nc.Name, nc.Labels[karpv1.LabelInstanceType],
				nc.CreationTimestamp.Format(time.TimeOnly), perNode[nc.Status.NodeName])
		}
		if len(suspects) > 0 {
			t.Logf("the manager's lines about %v:\n%s", suspects, local.LogMatching("karpenter", 80, suspects...))
		}
	}

	// NodePool and node class status, as kubectl shows them.
	perPool := map[string]int64{}
	for _, nc := range claims.Items {
		perPool[nc.Labels[karpv1.NodePoolLabelKey]]++
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var pools karpv1.NodePoolList
		if err := kube.List(ctx, &pools); err != nil {
			return false, nil
		}
		for _, np := range pools.Items {
			if !meta.IsStatusConditionTrue(np.Status.Conditions, karpv1.ConditionTypeReady) || np.Status.Nodes == nil || *np.Status.Nodes != perPool[np.Name] {
				return false, nil
			}
			if n := np.Status.Resources["nodes"]; n.Value() != perPool[np.Name] {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		var pools karpv1.NodePoolList
		_ = kube.List(ctx, &pools)
		t.Fatalf("NodePools must be Ready with status.nodes counting their NodeClaims %v: %+v", perPool, pools.Items)
	}
	// The metrics a dashboard reads, with upstream Karpenter's names. The node gauges are
	// rebuilt every few seconds (controllers/metrics/node.Interval), so they may trail the
	// scale-up: the scrape is repeated until all show, for up to 20 s.
	var missing []string
	_ = wait.PollUntilContextTimeout(ctx, time.Second, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := httpGetBody(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		if err != nil {
			missing = []string{err.Error()}
			return false, nil
		}
		missing = nil
		for _, name := range []string{"karpenter_nodeclaims_created_total{", "karpenter_scheduler_scheduling_duration_seconds_count{controller=\"provisioner\"}",
			"karpenter_pods_startup_duration_seconds_count", "karpenter_nodes_allocatable{", "karpenter_nodepools_usage{",
			"karpenter_nodes_total_pod_requests{", "karpenter_cluster_utilization_percent{", "karpenter_pods_state{",
			"karpenter_pods_bound_duration_seconds_count{", "karpenter_cloudprovider_duration_seconds_count{controller=\"nodeclaim.lifecycle\",method=\"Create\"",
			"karpenter_scheduler_queue_depth{controller=\"provisioner\"", "karpenter_nodepools_cost_total{",
			"karpenter_pods_provisioning_bound_duration_seconds_count{"} {
			if !strings.Contains(body, name) {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, nil
	})
	for _, name := range missing {
		t.Errorf("/metrics has no %s", name)
	}
	class := &kwokv1alpha1.KWOKNodeClass{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(class.Status.Conditions, karpv1.ConditionTypeReady) || class.Status.InstanceTypes < 100 {
		t.Errorf("KWOKNodeClass status: %+v", class.Status)
	}
}

// mixed is a Deployment like the sample's, of another size; its pods carry the label
// "inflate" like the sample's, so that the test lists them all.
func mixed(name string, replicas int32, cpu, mem string) *appsv1.Deployment {
	labels := map[string]string{"app": name, "inflate": "true"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpExists}}}}}}},
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}},
			}}},
	}
}
