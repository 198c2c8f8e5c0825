package capacitybuffer

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// Placement is what one batch did with a buffer's virtual pods.
type Placement = scheduling.BufferPlacement

// Store holds the virtual pods of every buffer ready for provisioning, for the cluster model
// to give to each snapshot, and what the provisioner last did with them, for the buffers'
// Provisioning condition. The controller writes the pods, the provisioner the placements.
type Store struct {
	mu     sync.Mutex
	pods   map[types.NamespacedName][]*corev1.Pod
	placed map[types.NamespacedName]Placement
	// changed carries the buffers whose placement changed, to reconcile their status.
	changed chan event.GenericEvent
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{pods: map[types.NamespacedName][]*corev1.Pod{}, placed: map[types.NamespacedName]Placement{},
		changed: make(chan event.GenericEvent, 1024)}
}

// Pods are every buffer's virtual pods, by buffer namespace and name then chunk; nil when
// there is no buffer. The pods are shared: readers must not change them.
func (s *Store) Pods() []*corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pods) == 0 {
		return nil
	}
	keys := make([]types.NamespacedName, 0, len(s.pods))
	for k := range s.pods {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	var out []*corev1.Pod
	for _, k := range keys {
		out = append(out, s.pods[k]...)
	}
	return out
}

// set replaces a buffer's pods (none: removes it) and reports whether they changed.
func (s *Store) set(key types.NamespacedName, pods []*corev1.Pod) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.pods[key]
	if len(pods) == 0 {
		delete(s.pods, key)
		delete(s.placed, key)
		return had
	}
	if had && len(old) == len(pods) && equality.Semantic.DeepEqual(old[0].Spec, pods[0].Spec) &&
		equality.Semantic.DeepEqual(old[0].Labels, pods[0].Labels) {
		// The same room: the pods keep their identity, which snapshots' caches key on.
		return false
	}
	s.pods[key] = pods
	return true
}

// placement is the last placement of a buffer's pods; ok is false before any batch.
func (s *Store) placement(key types.NamespacedName) (Placement, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.placed[key]
	return p, ok
}

// Placed records a batch's placements, by buffer, and has the buffers whose placement
// changed reconciled. Buffers with pods but absent from placed were not in the batch.
func (s *Store) Placed(placed map[types.NamespacedName]Placement) {
	s.mu.Lock()
	var changed []types.NamespacedName
	for key, p := range placed {
		if _, ok := s.pods[key]; !ok {
			continue
		}
		if old, ok := s.placed[key]; !ok || old != p {
			s.placed[key] = p
			changed = append(changed, key)
		}
	}
	s.mu.Unlock()
	for _, key := range changed {
		cb := &autoscalingv1beta1.CapacityBuffer{}
		cb.Namespace, cb.Name = key.Namespace, key.Name
		select {
		case s.changed <- event.GenericEvent{Object: cb}:
		default:
			// The queue is full of status updates already: the periodic resync writes this one.
		}
	}
}
