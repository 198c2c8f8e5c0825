package nodepool

import (
	"context"
	"errors"
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
)

// HashController stamps each NodePool with its template's hash and the hash version
// (karpenter.sh/nodepool-hash and karpenter.sh/nodepool-hash-version, as upstream), the two
// annotations of metadata it writes. When a NodePool's hash version is not the current one,
// the hash algorithm changed since it was stamped: its NodeClaims' hashes cannot be compared,
// so each NodeClaim of another version is re-stamped with the current version and, unless it
// has already drifted, the NodePool's current hash; no node drifts for a new algorithm
// (docs/architecture.md, "Drift").
type HashController struct {
	client client.Client
}

// NewHashController builds the NodePool hash controller.
func NewHashController(c client.Client) *HashController { return &HashController{client: c} }

// Register watches NodePools.
func (c *HashController) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodepool.hash").WithOptions(ratelimit.Options(1)).
		For(&karpv1.NodePool{}).Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile migrates the NodePool's NodeClaims when its hash version is not current, then
// writes its hash annotations.
func (c *HashController) Reconcile(ctx context.Context, np *karpv1.NodePool) (reconcile.Result, error) {
	if !np.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	hash := np.Hash()
	if np.Annotations[karpv1.NodePoolHashVersionAnnotationKey] != karpv1.NodePoolHashVersion {
		if err := c.migrate(ctx, np.Name, hash); err != nil {
			return reconcile.Result{}, err
		}
	}
	want := map[string]string{karpv1.NodePoolHashAnnotationKey: hash, karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
	if np.Annotations[karpv1.NodePoolHashAnnotationKey] == hash && np.Annotations[karpv1.NodePoolHashVersionAnnotationKey] == karpv1.NodePoolHashVersion {
		return reconcile.Result{}, nil
	}
	stored := np.DeepCopy()
	np.Annotations = maps.Clone(np.Annotations)
	if np.Annotations == nil {
		np.Annotations = map[string]string{}
	}
	maps.Copy(np.Annotations, want)
	return reconcile.Result{}, client.IgnoreNotFound(c.client.Patch(ctx, np, client.MergeFrom(stored)))
}

// migrate re-stamps the NodePool's NodeClaims hashed under another version.
func (c *HashController) migrate(ctx context.Context, nodePool, hash string) error {
	var list karpv1.NodeClaimList
	if err := c.client.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: nodePool}); err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		nc := &list.Items[i]
		if nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] == karpv1.NodePoolHashVersion {
			continue
		}
		stored := nc.DeepCopy()
		nc.Annotations = maps.Clone(nc.Annotations)
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] = karpv1.NodePoolHashVersion
		// A NodeClaim already drifted stays drifted: under the old algorithm it was, and the
		// new one cannot say otherwise.
		if meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDrifted) == nil {
			nc.Annotations[karpv1.NodePoolHashAnnotationKey] = hash
		}
		errs = append(errs, client.IgnoreNotFound(c.client.Patch(ctx, nc, client.MergeFrom(stored))))
	}
	return errors.Join(errs...)
}
