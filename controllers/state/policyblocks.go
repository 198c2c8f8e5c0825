package state

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PolicyBlocks are the pods the policies hold back, by namespace, as the provisioner's last
// batch decided them.
type PolicyBlocks struct{ c *Cluster }

// PolicyBlocks is the model's record of the pods the policies hold back.
func (c *Cluster) PolicyBlocks() PolicyBlocks { return PolicyBlocks{c} }

// SetPolicyBlocked records the pods policies kept pending in a batch, and the namespaces the
// batch accounted for (each with none blocked unless a pod says otherwise); a batch of no
// pods passes none and clears what the last one recorded.
func (pb PolicyBlocks) SetPolicyBlocked(namespaces []string, pods []*corev1.Pod) {
	c := pb.c
	blocked := make(map[string]map[types.NamespacedName]types.UID, len(namespaces))
	for _, ns := range namespaces {
		blocked[ns] = map[types.NamespacedName]types.UID{}
	}
	for _, p := range pods {
		if blocked[p.Namespace] == nil {
			blocked[p.Namespace] = map[types.NamespacedName]types.UID{}
		}
		blocked[p.Namespace][types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p.UID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocked = blocked
}

// PolicyBlocked is how many of a namespace's pods policies kept pending in the last batch
// and are pending still: a pod deleted or bound since no longer counts, so the number goes
// back to zero when the pods are gone, batch or not.
func (pb PolicyBlocks) PolicyBlocked(namespace string) int {
	c := pb.c
	return c.PolicyBlocks().PolicyBlockedByNamespace()[namespace]
}

// PolicyBlockedByNamespace is PolicyBlocked for every namespace the last batch accounted for.
func (pb PolicyBlocks) PolicyBlockedByNamespace() map[string]int {
	c := pb.c
	c.mu.Lock()
	blocked := c.blocked
	c.mu.Unlock()
	out := make(map[string]int, len(blocked))
	c.model.mu.RLock()
	defer c.model.mu.RUnlock()
	for ns, pods := range blocked {
		out[ns] = 0
		for key, uid := range pods {
			if p := c.model.pods[key]; p != nil && p.UID == uid && c.model.provisionable[key] {
				out[ns]++
			}
		}
	}
	return out
}
