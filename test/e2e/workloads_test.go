package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// daemonSet runs on the NodePool's nodes with a priority above the workloads', so that
// kube-scheduler places it first (and would preempt for it, as for a node agent).
func daemonSet(name, namespace, pool string, res corev1.ResourceRequirements) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{
				PriorityClassName: "e2e-node-agent", TerminationGracePeriodSeconds: ptr.To[int64](0),
				NodeSelector: map[string]string{karpv1.NodePoolLabelKey: pool},
				Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:   []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10", Resources: res}},
			}}}}
}

// describeDaemonSet is the DaemonSet's status and where each of its pods is, for a failure.
func describeDaemonSet(ctx context.Context, namespace, name string) string {
	ds := &appsv1.DaemonSet{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ds); err != nil {
		return fmt.Sprintf("DaemonSet %s/%s: %v", namespace, name, err)
	}
	out := fmt.Sprintf("DaemonSet %s/%s: desired %d, scheduled %d, ready %d; pods:", namespace, name,
		ds.Status.DesiredNumberScheduled, ds.Status.CurrentNumberScheduled, ds.Status.NumberReady)
	pods := &corev1.PodList{}
	if err := kube.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{"app": name}); err != nil {
		return out + " " + err.Error()
	}
	for _, p := range pods.Items {
		out += fmt.Sprintf(" %s(node=%q phase=%s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				out += fmt.Sprintf(" %s=%s:%s", c.Type, c.Reason, c.Message)
			}
		}
		out += ")"
	}
	return out
}

// A DaemonSet whose containers set only limits, and one in a namespace whose LimitRange sets
// defaults, each beside a Deployment of one pod on a NodePool of its own: the node launched
// holds the DaemonSet pod as kube-scheduler sees it and the pod, both run, and no NodeClaim
// follows for 90 seconds (the provisioner batches every few seconds: the loop this guards
// against launched a node within each batch). (Counting only the template's requests made a node too small;
// the DaemonSet pod, placed first, left the workload pod pending, and a node was launched
// for it again and again.)
func TestDaemonSetRequestsAsTheAPIServerAdmitsThem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 11*time.Minute)
	defer cancel()
	cpuMem := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	// Instance types of 2 and 4 cpu: the pod's 1 cpu alone fits a 2-cpu node, beside a 1-cpu
	// agent it does not.
	types := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceCPU, Operator: corev1.NodeSelectorOpIn, Values: []string{"2", "4"}})
	}
	limitsPool := isolated(t, ctx, nil, types)
	rangePool := isolated(t, ctx, nil, types)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-limitrange"}}
	create(t, ctx,
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-node-agent"}, Value: 1000000},
		ns,
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns.Name}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, Default: cpuMem("1", "512Mi")}}}},
		daemonSet("agent-limits", "default", limitsPool.Name, corev1.ResourceRequirements{Limits: cpuMem("1", "512Mi")}),
		daemonSet("agent-defaulted", ns.Name, rangePool.Name, corev1.ResourceRequirements{}),
		deployment("beside-limits", 1, limitsPool.Name, "1", nil),
		deployment("beside-defaulted", 1, rangePool.Name, "1", nil),
	)
	for _, w := range []struct{ app, agent, namespace string }{{"beside-limits", "agent-limits", "default"}, {"beside-defaulted", "agent-defaulted", ns.Name}} {
		app := w.app
		pods := runningPods(t, ctx, app, 1)
		// The DaemonSet's pod may start after the workload's (the DaemonSet controller acts
		// on the node's events, in a kube-controller-manager the rest of the suite keeps
		// busy): wait for both. Once (of many full-suite runs) one did not run within a
		// minute; the failure now says where it was.
		running := 0
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			agents := &corev1.PodList{}
			if err := kube.List(ctx, agents, client.MatchingFields{"spec.nodeName": pods[0].Spec.NodeName}); err != nil {
				return false, nil
			}
			running = 0
			for _, p := range agents.Items {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			return running == 2, nil
		}); err != nil {
			t.Errorf("%s's node %s runs %d pods, want the pod and its DaemonSet's; %s", app, pods[0].Spec.NodeName, running, describeDaemonSet(ctx, w.namespace, w.agent))
		}
	}
	// No NodeClaim follows: watch for 90 seconds, many provisioning batches.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		for _, np := range []*karpv1.NodePool{limitsPool, rangePool} {
			var claims karpv1.NodeClaimList
			if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
				t.Fatal(err)
			}
			if len(claims.Items) != 1 {
				t.Fatalf("NodePool %s has %d NodeClaims, want the one node for its pod and DaemonSet\n%s", np.Name, len(claims.Items), local.LogTail("karpenter", 20))
			}
		}
		time.Sleep(5 * time.Second)
	}
}
