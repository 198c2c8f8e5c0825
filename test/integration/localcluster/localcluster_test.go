// Package localcluster_test starts the cluster that `make run` and the e2e suites use, and
// checks each part does its job: kwok turns a Node Ready, kube-scheduler binds a Deployment's
// pods, kube-controller-manager creates them, kwok runs them; and Stop leaves nothing behind.
package localcluster_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/test/cluster"
	"github.com/karpenter-policy/karpenter/test/env"
)

func TestLocalCluster(t *testing.T) {
	bins := os.Getenv("KUBEBUILDER_ASSETS")
	if bins == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run with 'make envtest'")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(), BinDir: bins, RepoRoot: env.RepoRoot(), Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	kube, err := client.New(c.Config, client.Options{Scheme: install.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}

	// The samples apply: the CRDs are installed and their CEL accepts them.
	if err := cluster.Apply(ctx, c.Config, env.RepoRoot()+"/config/samples"); err != nil {
		t.Fatal(err)
	}
	var pools karpv1.NodePoolList
	if err := kube.List(ctx, &pools); err != nil || len(pools.Items) != 2 {
		t.Fatalf("expected the 2 sample NodePools, got %d (%v)", len(pools.Items), err)
	}

	// kubectl, as a person runs it: printer columns, and a rejection that names the field.
	kubectl := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(bins, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := kubectl("", "get", "nodepools")
	if err != nil || !regexp.MustCompile(`NAME\s+NODECLASS\s+NODES\s+READY\s+AGE`).MatchString(out) || !strings.Contains(out, "general") {
		t.Fatalf("kubectl get nodepools: want the printer columns and the sample pools, got (%v):\n%s", err, out)
	}
	out, err = kubectl(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: invalid}
spec:
  weight: 500
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: kubernetes.io/hostname, operator: In, values: [a]}]
`, "apply", "-f", "-")
	if err == nil || !strings.Contains(out, "spec.weight") || !strings.Contains(out, "spec.template.spec.requirements[0].key") {
		t.Fatalf("kubectl apply of an invalid NodePool: want a rejection naming spec.weight and the requirement key, got (%v):\n%s", err, out)
	}

	// kwok plays the kubelet of an annotated node.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        "kwok-test-node",
		Annotations: map[string]string{cluster.KwokNodeAnnotation: "fake"},
		Labels:      map[string]string{"kubernetes.io/hostname": "kwok-test-node", "test": "localcluster"},
	}, Status: corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
	}}
	if err := kube.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	// Status is a subresource: set capacity the way a kubelet would. kwok and
	// kube-controller-manager write to the new Node at once, so patch rather
	// than update: an update would race them on the resourceVersion.
	base := node.DeepCopy()
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Allocatable = node.Status.Capacity
	if err := kube.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "node Ready", func() (bool, error) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return false, err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}, c)

	// kube-controller-manager makes the pods, kube-scheduler binds them, kwok runs them.
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"test": "localcluster"},
					Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
				},
			},
		},
	}
	if err := kube.Create(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "3 pods Running on the kwok node", func() (bool, error) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"}); err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == node.Name && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				running++
			}
		}
		return running == 3, nil
	}, c)

	// Deleting the Deployment deletes its pods (garbage collector, kwok confirms deletion).
	if err := kube.Delete(ctx, deploy, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "pods gone", func() (bool, error) {
		var pods corev1.PodList
		err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"})
		return err == nil && len(pods.Items) == 0, err
	}, c)

	apiserverPort := strings.TrimPrefix(c.APIServerURL, "https://127.0.0.1:")
	procs := c.Processes()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	for _, p := range procs {
		if exited, _ := p.Exited(); !exited {
			t.Errorf("%s still running after Stop", p.Name)
		}
	}
	if l, err := net.Listen("tcp", "127.0.0.1:"+apiserverPort); err != nil {
		t.Errorf("kube-apiserver port %s still bound after Stop: %v", apiserverPort, err)
	} else {
		l.Close()
	}
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, error), c *cluster.Cluster) {
	t.Helper()
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		ok, err := cond()
		lastErr = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)\nkwok log:\n%s\nscheduler log:\n%s", what, err, lastErr,
			c.LogTail("kwok", 15), c.LogTail("kube-scheduler", 15))
	}
	t.Logf("%s", fmt.Sprintf("ok: %s", what))
}
