package kwok

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// Spot interruptions of the simulated cloud. A running Spot node is interrupted at the rate
// its KWOKNodeClass's spec.interruption asks for, or at once when someone annotates it with
// InterruptAnnotation=true (to test interruption handling deterministically). The notice is
// the InterruptionDeadlineAnnotation on the Node, with a Warning Event SpotInterruption on
// it, as a cloud's interruption message would come; when the deadline passes the instance is
// reclaimed: the instance is terminated (instance.go), its Node goes NotReady and is deleted,
// and Karpenter's termination finalizes it.
const (
	InterruptAnnotation            = "karpenter.kwok.sh/interrupt"
	InterruptionDeadlineAnnotation = cloudprovider.InterruptionNoticeAnnotation
	// DefaultInterruptionNotice is the warning time when the node class gives none (AWS
	// gives two minutes).
	DefaultInterruptionNotice = 2 * time.Minute
	// InterruptionTick is how often the injector looks at the Spot nodes.
	InterruptionTick = 5 * time.Second
)

// Interrupter injects Spot interruptions; add it to the manager.
type Interrupter struct {
	p        *Provider
	recorder events.EventRecorder
	tick     time.Duration
}

// Interrupter returns the provider's interruption injector.
func (p *Provider) Interrupter(recorder events.EventRecorder) *Interrupter {
	return &Interrupter{p: p, recorder: recorder, tick: InterruptionTick}
}

// WithTick changes how often Start steps, and so the chance per step (tests use an hour).
func (i *Interrupter) WithTick(d time.Duration) *Interrupter {
	i.tick = d
	return i
}

// NeedLeaderElection is true: one replica plays the cloud.
func (i *Interrupter) NeedLeaderElection() bool { return true }

// Start steps every tick until ctx ends.
func (i *Interrupter) Start(ctx context.Context) error {
	return every(ctx, i.p.clock, i.tick, "spot interruption injection", i.Step)
}

// Step notices new interruptions and reclaims the instances whose notice has run out.
func (i *Interrupter) Step(ctx context.Context) error {
	// Only the Spot nodes, and not copied: on an idle cluster of a thousand nodes, copying
	// every Node every tick was the largest part of the manager's cpu. A node is copied
	// before it is changed (the list shares the cache's objects).
	var nodes corev1.NodeList
	if err := i.p.client.List(ctx, &nodes, client.MatchingLabels{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeSpot},
		client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	now := i.p.clock.Now()
	for n := range nodes.Items {
		node := &nodes.Items[n]
		if !strings.HasPrefix(node.Spec.ProviderID, ProviderIDPrefix) || terminated(node) {
			continue
		}
		// A noticed instance is reclaimed at its deadline, drained or not, as a cloud does.
		if deadline, ok := node.Annotations[InterruptionDeadlineAnnotation]; ok {
			at, err := time.Parse(time.RFC3339, deadline)
			if err == nil && now.Before(at) {
				continue
			}
			if err := i.p.terminate(ctx, node.DeepCopy()); err != nil {
				return fmt.Errorf("reclaiming node %s: %w", node.Name, err)
			}
			i.recorder.Eventf(node, nil, corev1.EventTypeWarning, "SpotReclaimed", "Interruption", "Spot instance %s reclaimed", node.Spec.ProviderID)
			continue
		}
		if node.DeletionTimestamp != nil {
			continue
		}
		notice, interrupt := i.decide(ctx, node)
		if !interrupt {
			continue
		}
		node = node.DeepCopy()
		base := node.DeepCopy()
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		at := now.Add(notice).UTC().Truncate(time.Second)
		node.Annotations[InterruptionDeadlineAnnotation] = at.Format(time.RFC3339)
		if err := i.p.client.Patch(ctx, node, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("noticing the interruption of node %s: %w", node.Name, err)
		}
		i.recorder.Eventf(node, nil, corev1.EventTypeWarning, "SpotInterruption", "Interruption",
			"Spot interruption: instance %s will be reclaimed at %s", node.Spec.ProviderID, at.Format(time.RFC3339))
	}
	return nil
}

// decide draws whether a Spot node is interrupted this tick, and its notice.
func (i *Interrupter) decide(ctx context.Context, node *corev1.Node) (time.Duration, bool) {
	var in *kwokv1alpha1.InterruptionInjection
	nc := &kwokv1alpha1.KWOKNodeClass{}
	if name := node.Annotations[NodeClassAnnotation]; name != "" && i.p.client.Get(ctx, client.ObjectKey{Name: name}, nc) == nil {
		in = nc.Spec.Interruption
	}
	notice := DefaultInterruptionNotice
	if in != nil && in.Notice != nil {
		notice = in.Notice.Duration
	}
	if node.Annotations[InterruptAnnotation] == "true" {
		return notice, true
	}
	if in == nil || in.SpotPercentPerHour <= 0 {
		return 0, false
	}
	chance := float64(in.SpotPercentPerHour) / 100 * i.tick.Hours()
	i.p.mu.Lock()
	defer i.p.mu.Unlock()
	return notice, i.p.rand.Float64() < chance
}
