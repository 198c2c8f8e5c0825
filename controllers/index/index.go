// Package index holds the cache indexes the controllers look objects up by, and the lookups
// that use them: listing every Node or NodeClaim from the cache to find one deep-copies them
// all, which in a scale-out of hundreds of nodes made each NodeClaim reconcile cost
// milliseconds and the lifecycle controller the manager's main consumer of cpu.
package index

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

const (
	// NodeClaimProviderID indexes NodeClaims by status.providerID.
	NodeClaimProviderID = "status.providerID"
	// NodeProviderID indexes Nodes by spec.providerID.
	NodeProviderID = "spec.providerID"
	// PodNodeName indexes Pods by spec.nodeName.
	PodNodeName = "spec.nodeName"
	// NodeClaimNodeName indexes NodeClaims by status.nodeName.
	NodeClaimNodeName = "status.nodeName"
	// NodeClaimInstanceID indexes NodeClaims by the instance ID of their provider ID (the part
	// after its last "/", as a cloud's interruption notices name instances).
	NodeClaimInstanceID = "status.providerID.instance"
	// VolumeAttachmentNodeName indexes VolumeAttachments by spec.nodeName.
	VolumeAttachmentNodeName = "spec.nodeName"
)

// Index is one field index: objects of Object's kind by Field, the values Extract gives.
type Index struct {
	Object  client.Object
	Field   string
	Extract client.IndexerFunc
}

// Indexes are the indexes the controllers look objects up by (tests give them to the fake
// client's builder).
var Indexes = []Index{
	{&karpv1.NodeClaim{}, NodeClaimProviderID, func(o client.Object) []string { return nonEmpty(o.(*karpv1.NodeClaim).Status.ProviderID) }},
	{&karpv1.NodeClaim{}, NodeClaimNodeName, func(o client.Object) []string { return nonEmpty(o.(*karpv1.NodeClaim).Status.NodeName) }},
	{&karpv1.NodeClaim{}, NodeClaimInstanceID, func(o client.Object) []string { return nonEmpty(InstanceID(o.(*karpv1.NodeClaim).Status.ProviderID)) }},
	{&corev1.Node{}, NodeProviderID, func(o client.Object) []string { return nonEmpty(o.(*corev1.Node).Spec.ProviderID) }},
	{&corev1.Pod{}, PodNodeName, func(o client.Object) []string { return nonEmpty(o.(*corev1.Pod).Spec.NodeName) }},
	{&storagev1.VolumeAttachment{}, VolumeAttachmentNodeName, func(o client.Object) []string { return nonEmpty(o.(*storagev1.VolumeAttachment).Spec.NodeName) }},
}

// Register adds the indexes to the manager's cache; call it once, before the manager starts.
func Register(ctx context.Context, fi client.FieldIndexer) error {
	for _, i := range Indexes {
		if err := fi.IndexField(ctx, i.Object, i.Field, i.Extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", i.Object, i.Field, err)
		}
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// NodeByProviderID is the Node with the provider ID, or nil.
func NodeByProviderID(ctx context.Context, c client.Reader, providerID string) (*corev1.Node, error) {
	var nodes corev1.NodeList
	if err := listBy(ctx, c, &nodes, NodeProviderID, providerID); err != nil {
		return nil, err
	}
	for i := range nodes.Items {
		if nodes.Items[i].Spec.ProviderID == providerID {
			return &nodes.Items[i], nil
		}
	}
	return nil, nil
}

// NodeClaimsByProviderID are the NodeClaims with the provider ID (one, unless something is
// wrong).
func NodeClaimsByProviderID(ctx context.Context, c client.Reader, providerID string) ([]karpv1.NodeClaim, error) {
	var claims karpv1.NodeClaimList
	if err := listBy(ctx, c, &claims, NodeClaimProviderID, providerID); err != nil {
		return nil, err
	}
	out := claims.Items[:0]
	for _, nc := range claims.Items {
		if nc.Status.ProviderID == providerID {
			out = append(out, nc)
		}
	}
	return out, nil
}

// NodeClaimOfNode is the name of the NodeClaim whose node this is, or "".
func NodeClaimOfNode(ctx context.Context, c client.Reader, node string) (string, error) {
	var claims karpv1.NodeClaimList
	if err := listBy(ctx, c, &claims, NodeClaimNodeName, node); err != nil {
		return "", err
	}
	for i := range claims.Items {
		if claims.Items[i].Status.NodeName == node {
			return claims.Items[i].Name, nil
		}
	}
	return "", nil
}

// listBy lists by the index. The reader must be the manager's cache, which has the indexes
// (Register): an error is returned as it is, never turned into a list of everything, which
// would cost a copy of every object per lookup and hide a missing index.
func listBy(ctx context.Context, c client.Reader, list client.ObjectList, field, value string) error {
	if err := c.List(ctx, list, client.MatchingFields{field: value}); err != nil {
		return fmt.Errorf("listing %T by index %s=%s: %w", list, field, value, err)
	}
	return nil
}

// InstanceID is the instance ID of a provider ID: what follows its last "/".
func InstanceID(providerID string) string {
	if i := strings.LastIndex(providerID, "/"); i >= 0 {
		return providerID[i+1:]
	}
	return providerID
}

// NodeClaimsByInstanceID are the NodeClaims whose provider ID ends with the instance ID.
func NodeClaimsByInstanceID(ctx context.Context, c client.Reader, id string) ([]karpv1.NodeClaim, error) {
	var claims karpv1.NodeClaimList
	if err := listBy(ctx, c, &claims, NodeClaimInstanceID, id); err != nil {
		return nil, err
	}
	out := claims.Items[:0]
	for _, nc := range claims.Items {
		if InstanceID(nc.Status.ProviderID) == id {
			out = append(out, nc)
		}
	}
	return out, nil
}
