package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// ReplayAnnotation is what replayBoundPods sets on a pod kwok has not played: a pod update kwok
// sees, so that its pod stages run.
const ReplayAnnotation = "local.karpenter.sh/kwok-replay"

// replayAfter is how long a pod bound to a kwok node may stay unplayed (Pending, no host IP)
// before it is nudged; replayEvery is how often pods are looked at.
const (
	replayAfter = 5 * time.Second
	replayEvery = 3 * time.Second
)

// replayBoundPods makes kwok play every pod bound to a node it manages. kwok plays a pod on the
// events of the pod; a pod bound to a node before kwok's node informer has the node (a
// DaemonSet's pod on a fresh node, first of all, and more often the busier the machine) is
// passed over and never looked at again, and stays Pending on a Ready node for good. A real
// kubelet would have started it: every such pod older than replayAfter gets an annotation
// update, which kwok plays. It runs until ctx ends.
func replayBoundPods(ctx context.Context, c *Cluster) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		c.opts.Log("kwok pod replay: %v", err)
		return
	}
	t := time.NewTicker(replayEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Pending pods first: the nodes are listed only when one is bound and waiting.
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending"})
		if err != nil || !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName != "" }) {
			continue
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		kwok := map[string]bool{}
		for _, n := range nodes.Items {
			if n.Annotations[KwokNodeAnnotation] == "fake" {
				kwok[n.Name] = true
			}
		}
		now := time.Now()
		for i := range pods.Items {
			p := &pods.Items[i]
			if !unplayed(p, kwok, now) {
				continue
			}
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, ReplayAnnotation, now.UTC().Format(time.RFC3339))
			if _, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
				c.opts.Log("kwok had not played pod %s/%s on node %s: replayed", p.Namespace, p.Name, p.Spec.NodeName)
			}
		}
	}
}

// unplayed is a pod bound to a kwok node more than replayAfter ago that kwok has not started:
// Pending, not being deleted, without a host IP.
func unplayed(p *corev1.Pod, kwok map[string]bool, now time.Time) bool {
	if p.Spec.NodeName == "" || !kwok[p.Spec.NodeName] || p.DeletionTimestamp != nil || p.Status.HostIP != "" {
		return false
	}
	bound := p.CreationTimestamp.Time
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
			bound = cond.LastTransitionTime.Time
		}
	}
	return now.Sub(bound) > replayAfter
}
