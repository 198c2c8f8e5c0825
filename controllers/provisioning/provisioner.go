// Package provisioning turns pending pods into NodeClaims: a batcher gathers the pods the
// scheduler could not place, and the provisioner solves the batch against the cluster's state
// and creates the NodeClaims the solver decides, nominating the pods to them so that the next
// batch does not launch again for the same pods.
package provisioning

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/nodepool"
	"github.com/karpenter-policy/karpenter/controllers/provisioning/scheduling"
	"github.com/karpenter-policy/karpenter/controllers/state"
)

// Provisioner launches capacity for pending pods.
type Provisioner struct {
	client   client.Client
	cluster  *state.Cluster
	cloud    cloudprovider.CloudProvider
	recorder events.EventRecorder
	clock    clock.Clock
	batcher  *Batcher
}

// NewProvisioner builds the provisioner; idle and max are the batch windows.
func NewProvisioner(c client.Client, cluster *state.Cluster, cloud cloudprovider.CloudProvider, recorder events.EventRecorder, clk clock.Clock, idle, max time.Duration) *Provisioner {
	return &Provisioner{client: c, cluster: cluster, cloud: cloud, recorder: recorder, clock: clk, batcher: NewBatcher(clk, idle, max)}
}

// Register adds the pod trigger and the provisioning loop to the manager.
func (p *Provisioner) Register(mgr ctrl.Manager) error {
	if err := mgr.Add(p); err != nil {
		return err
	}
	provisionable := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		return ok && state.Provisionable(pod)
	})
	return ctrl.NewControllerManagedBy(mgr).Named("provisioning.trigger").
		For(&corev1.Pod{}, builder.WithPredicates(provisionable, predicate.Funcs{DeleteFunc: func(event.DeleteEvent) bool { return false }})).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			p.batcher.Trigger()
			return reconcile.Result{}, nil
		}))
}

// NeedLeaderElection: only the leader launches.
func (p *Provisioner) NeedLeaderElection() bool { return true }

// RetryInterval is how often pods still pending are tried again, for changes no pod event
// announces (a NodeClaim that failed to launch, capacity freed elsewhere, a limit raised).
const RetryInterval = 10 * time.Second

// Start runs batches until ctx ends.
func (p *Provisioner) Start(ctx context.Context) error {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.clock.After(RetryInterval):
				p.batcher.Trigger()
			}
		}
	}()
	for {
		if !p.batcher.Wait(ctx) {
			return nil
		}
		if err := p.Provision(ctx); err != nil {
			log.FromContext(ctx).Error(err, "provisioning")
			// Try again soon: the pods are still pending.
			p.batcher.Trigger()
		}
	}
}

// Provision solves the pending pods once and creates the NodeClaims decided.
func (p *Provisioner) Provision(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("provisioner")
	snap, err := p.cluster.Snapshot(ctx, p.cloud)
	if err != nil {
		return err
	}
	if len(snap.Input.Pods) == 0 {
		return nil
	}
	start := p.clock.Now()
	res, err := scheduling.Solve(snap.Input)
	if err != nil {
		return fmt.Errorf("solving: %w", err)
	}
	metrics.SchedulingDuration.Observe(p.clock.Since(start).Seconds())
	logger.Info("solved", "pods", len(snap.Input.Pods), "nodeClaims", len(res.NodeClaims), "unschedulable", len(res.Unschedulable),
		"pricePerHour", res.PricePerHour(), "duration", p.clock.Since(start).String())
	for name, pods := range res.Existing {
		for _, pod := range pods {
			p.cluster.Nominate(pod, name)
		}
	}
	for _, c := range res.NodeClaims {
		nc := nodeClaimFor(snap.NodePools[c.NodePool], c)
		if err := p.client.Create(ctx, nc); err != nil {
			return fmt.Errorf("creating nodeclaim for nodepool %s: %w", c.NodePool, err)
		}
		metrics.NodeClaimsCreated.WithLabelValues("provisioning", c.NodePool).Inc()
		logger.Info("created nodeclaim", "NodeClaim", nc.Name, "NodePool", c.NodePool, "instanceType", c.InstanceType.Name,
			"instanceTypes", len(c.InstanceTypes), "pods", len(c.Pods))
		for _, pod := range c.Pods {
			p.cluster.Nominate(pod, nc.Name)
			p.recorder.Eventf(pod, nc, corev1.EventTypeNormal, "Nominated", "Provisioning", "Pod should schedule on NodeClaim %s", nc.Name)
		}
	}
	for _, u := range res.Unschedulable {
		p.recorder.Eventf(u.Pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Provisioning", "Failed to schedule pod, %s", u.Reason)
	}
	return nil
}

// nodeClaimFor builds the NodeClaim of a decision from its NodePool's template.
func nodeClaimFor(np *karpv1.NodePool, c *scheduling.NodeClaim) *karpv1.NodeClaim {
	reqs := c.Requirements.Copy()
	// The NodePool is named by the NodeClaim's label; requirements on Karpenter's own label are
	// refused by validation.
	delete(reqs, karpv1.NodePoolLabelKey)
	names := make([]string, 0, len(c.InstanceTypes))
	for _, it := range c.InstanceTypes {
		names = append(names, it.Name)
	}
	sort.Strings(names)
	reqs[karpv1.LabelInstanceType] = scheduling.NewRequirement(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, names...).Intersect(reqsOr(reqs, karpv1.LabelInstanceType))
	labels := map[string]string{karpv1.NodePoolLabelKey: np.Name}
	for k, v := range np.Spec.Template.Labels {
		labels[k] = v
	}
	annotations := map[string]string{karpv1.NodePoolHashAnnotationKey: nodepool.TemplateHash(np), karpv1.NodePoolHashVersionAnnotationKey: nodepool.HashVersion}
	for k, v := range np.Spec.Template.Annotations {
		annotations[k] = v
	}
	t := np.Spec.Template.Spec
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%s", np.Name, utilrand.String(5)),
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name, UID: np.UID,
				BlockOwnerDeletion: ptrTrue()}},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints: t.Taints, StartupTaints: t.StartupTaints,
			Requirements:           reqs.NodeSelectorRequirements(),
			Resources:              karpv1.ResourceRequirements{Requests: c.Requests},
			NodeClassRef:           t.NodeClassRef,
			ExpireAfter:            t.ExpireAfter,
			TerminationGracePeriod: t.TerminationGracePeriod,
		},
	}
}

func reqsOr(rs scheduling.Requirements, key string) *scheduling.Requirement {
	if r, ok := rs[key]; ok {
		return r
	}
	return scheduling.NewRequirement(key, corev1.NodeSelectorOpExists)
}

func ptrTrue() *bool { b := true; return &b }
