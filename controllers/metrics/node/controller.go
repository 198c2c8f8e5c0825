// Package node exports upstream Karpenter's per-node gauges from the cluster model every few
// seconds: each node's allocatable, system overhead, the requests and limits of its pods and
// of its DaemonSet pods, and its age, labelled as upstream (node_name, node_phase, managed,
// the core well-known labels in snake case, resource_type), and the cluster's utilization
// per resource. A node that is gone loses its series at the next pass. It only reads the
// model: it writes nothing to the API server and never lists on its own.
package node

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// Interval is how often the gauges are rebuilt, as upstream's node metrics controller.
const Interval = 5 * time.Second

// Model is what the controller reads: the cluster model's objects.
type Model interface {
	Synced() bool
	Objects() *snapshot.Objects
}

// Controller rebuilds the node gauges every Interval.
type Controller struct {
	model Model
	clock clock.Clock
	// series deletes the series of nodes that are gone.
	series *metrics.Series
}

// NewController builds the node metrics controller.
func NewController(model Model, clk clock.Clock) *Controller {
	return &Controller{model: model, clock: clk, series: metrics.NewSeries(key)}
}

// NeedLeaderElection is true, as upstream's: the leader's model is the one acted on.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start rebuilds the gauges until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	for {
		if c.model.Synced() {
			c.Pass()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(Interval):
		}
	}
}

// Pass rebuilds every gauge from the model as it is now.
func (c *Controller) Pass() {
	objs := c.model.Objects()
	managed := map[string]bool{}
	for _, nc := range objs.NodeClaims {
		if nc.Status.NodeName != "" {
			managed[nc.Status.NodeName] = true
		}
	}
	type totals struct{ requests, limits, daemonRequests, daemonLimits corev1.ResourceList }
	perNode := map[string]*totals{}
	for _, p := range objs.Pods {
		if p.Spec.NodeName == "" || scheduling.IsTerminal(p) {
			continue
		}
		t := perNode[p.Spec.NodeName]
		if t == nil {
			t = &totals{corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}}
			perNode[p.Spec.NodeName] = t
		}
		requests, limits := scheduling.PodRequests(p), podLimits(p)
		// Upstream's totals are of the pods' resources; the pod count is not one of them.
		delete(requests, corev1.ResourcePods)
		scheduling.AddResources(t.requests, requests)
		scheduling.AddResources(t.limits, limits)
		if scheduling.IsOwnedByDaemonSet(p) {
			scheduling.AddResources(t.daemonRequests, requests)
			scheduling.AddResources(t.daemonLimits, limits)
		}
	}
	gauge := c.series.Set
	allocatable, requested := corev1.ResourceList{}, corev1.ResourceList{}
	for _, n := range objs.Nodes {
		labels := prometheus.Labels{"node_name": n.Name, "node_phase": string(n.Status.Phase), "managed": strconv.FormatBool(managed[n.Name])}
		for from, to := range metrics.NodeWellKnownLabels {
			labels[to] = n.Labels[from]
		}
		t := perNode[n.Name]
		if t == nil {
			t = &totals{}
		}
		overhead := corev1.ResourceList{}
		for k, q := range n.Status.Capacity {
			o := q.DeepCopy()
			if a, ok := n.Status.Allocatable[k]; ok {
				o.Sub(a)
			}
			overhead[k] = o
		}
		for g, list := range map[*prometheus.GaugeVec]corev1.ResourceList{
			metrics.NodesAllocatable: n.Status.Allocatable, metrics.NodesSystemOverhead: overhead,
			metrics.NodesPodRequests: t.requests, metrics.NodesPodLimits: t.limits,
			metrics.NodesDaemonRequests: t.daemonRequests, metrics.NodesDaemonLimits: t.daemonLimits,
		} {
			for name, q := range list {
				withType := prometheus.Labels{"resource_type": resourceType(name)}
				for k, v := range labels {
					withType[k] = v
				}
				gauge(g, withType, quantity(name, q))
			}
		}
		gauge(metrics.NodesCurrentLifetime, labels, c.clock.Since(n.CreationTimestamp.Time).Seconds())
		scheduling.AddResources(allocatable, n.Status.Allocatable)
		scheduling.AddResources(requested, t.requests)
	}
	for name, a := range allocatable {
		if a.IsZero() {
			continue
		}
		r := requested[name]
		share := float64(r.Value()) / float64(a.Value())
		if name == corev1.ResourceCPU {
			share = float64(r.MilliValue()) / float64(a.MilliValue())
		}
		gauge(metrics.ClusterUtilization, prometheus.Labels{"resource_type": resourceType(name)}, 100*share)
	}
	c.series.Flush()
}

// quantity is a resource's value as upstream exports it: CPU in cores, anything else in its
// unit (bytes, pods).
func quantity(name corev1.ResourceName, q resource.Quantity) float64 {
	if name == corev1.ResourceCPU {
		return float64(q.MilliValue()) / 1000
	}
	return float64(q.Value())
}

// resourceType is a resource's name as upstream's resource_type label spells it.
func resourceType(name corev1.ResourceName) string {
	return strings.ReplaceAll(strings.ToLower(string(name)), "-", "_")
}

// key tells the label sets of the node gauges apart: their values in a fixed order, cheaper
// than sorting names for every series of every node each pass.
func key(l prometheus.Labels) string {
	var b strings.Builder
	for _, name := range slices.Concat(metrics.NodeLabels, []string{"resource_type"}) {
		b.WriteString(l[name])
		b.WriteByte(0)
	}
	return b.String()
}

// podLimits are a pod's limits as its requests are counted (scheduling.PodRequests): the
// containers' sum or the largest init container's, plus sidecars, pod-level limits where
// set, and the pod overhead.
func podLimits(p *corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		scheduling.AddResources(total, c.Resources.Limits)
	}
	sidecars := corev1.ResourceList{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			scheduling.AddResources(sidecars, c.Resources.Limits)
			continue
		}
		need := sidecars.DeepCopy()
		scheduling.AddResources(need, c.Resources.Limits)
		for k, v := range need {
			if q, ok := total[k]; !ok || v.Cmp(q) > 0 {
				total[k] = v.DeepCopy()
			}
		}
	}
	scheduling.AddResources(total, sidecars)
	if pr := p.Spec.Resources; pr != nil {
		for k, v := range pr.Limits {
			total[k] = v.DeepCopy()
		}
	}
	scheduling.AddResources(total, p.Spec.Overhead)
	return total
}
