package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

var (
	// CloudProviderDuration is how long the provider's methods took, by the controller that
	// called, the method and the provider, as upstream's karpenter_cloudprovider_duration_seconds
	// (its default buckets).
	CloudProviderDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_cloudprovider_duration_seconds", Help: "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
	}, []string{"controller", "method", "provider"})
	// CloudProviderErrors counts the provider's errors, by controller, method, provider, the
	// error's kind (NodeClaimNotFoundError, InsufficientCapacityError, NodeClassNotReadyError,
	// unknown) and the NodeClaim's NodePool ("" for calls about no NodeClaim), as upstream's
	// karpenter_cloudprovider_errors_total.
	CloudProviderErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_cloudprovider_errors_total", Help: "Total number of errors returned from CloudProvider calls.",
	}, []string{"controller", "method", "provider", "error", "nodepool"})
)

// errorKind is the error label of an error, upstream's categories.
func errorKind(err error) string {
	switch {
	case cloudprovider.IsNodeClaimNotFoundError(err):
		return "NodeClaimNotFoundError"
	case cloudprovider.IsInsufficientCapacityError(err):
		return "InsufficientCapacityError"
	case cloudprovider.IsNodeClassNotReadyError(err):
		return "NodeClassNotReadyError"
	}
	return "unknown"
}

// DecorateCloud returns the provider with each call timed and each error counted under the
// controller's name (the metrics' controller label). What the provider implements beyond
// CloudProvider (Rebooter, CapacityReporter) the result implements too, and nothing more: a
// controller that looks for a reboot finds one only where the provider has it. Decorate a
// provider once per controller, never a decorated one (calls would count twice).
func DecorateCloud(cp cloudprovider.CloudProvider, controller string) cloudprovider.CloudProvider {
	d := &decorated{CloudProvider: cp, controller: controller}
	rebooter, reboots := cp.(cloudprovider.Rebooter)
	reporter, reports := cp.(cloudprovider.CapacityReporter)
	switch {
	case reboots && reports:
		return &struct {
			*decorated
			rebootingCloud
			cloudprovider.CapacityReporter
		}{d, rebootingCloud{d, rebooter}, reporter}
	case reboots:
		return &struct {
			*decorated
			rebootingCloud
		}{d, rebootingCloud{d, rebooter}}
	case reports:
		return &struct {
			*decorated
			cloudprovider.CapacityReporter
		}{d, reporter}
	}
	return d
}

type decorated struct {
	cloudprovider.CloudProvider
	controller string
}

// observe times a call from start, and counts err if any.
func (d *decorated) observe(method, nodePool string, start time.Time, err error) {
	provider := d.Name()
	CloudProviderDuration.WithLabelValues(d.controller, method, provider).Observe(time.Since(start).Seconds())
	if err != nil {
		CloudProviderErrors.WithLabelValues(d.controller, method, provider, errorKind(err), nodePool).Inc()
	}
}

func nodePoolOf(nc *karpv1.NodeClaim) string {
	if nc == nil {
		return ""
	}
	return nc.Labels[karpv1.NodePoolLabelKey]
}

func (d *decorated) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	start := time.Now()
	out, err := d.CloudProvider.Create(ctx, nc)
	d.observe("Create", nodePoolOf(nc), start, err)
	return out, err
}

func (d *decorated) Delete(ctx context.Context, nc *karpv1.NodeClaim) error {
	start := time.Now()
	err := d.CloudProvider.Delete(ctx, nc)
	d.observe("Delete", nodePoolOf(nc), start, err)
	return err
}

func (d *decorated) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	start := time.Now()
	out, err := d.CloudProvider.Get(ctx, providerID)
	d.observe("Get", "", start, err)
	return out, err
}

func (d *decorated) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	start := time.Now()
	out, err := d.CloudProvider.List(ctx)
	d.observe("List", "", start, err)
	return out, err
}

func (d *decorated) GetInstanceTypes(ctx context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	start := time.Now()
	out, err := d.CloudProvider.GetInstanceTypes(ctx, np)
	pool := ""
	if np != nil {
		pool = np.Name
	}
	d.observe("GetInstanceTypes", pool, start, err)
	return out, err
}

func (d *decorated) IsDrifted(ctx context.Context, nc *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	start := time.Now()
	out, err := d.CloudProvider.IsDrifted(ctx, nc)
	d.observe("IsDrifted", nodePoolOf(nc), start, err)
	return out, err
}

func (d *decorated) RepairPolicies(ctx context.Context, np *karpv1.NodePool) ([]cloudprovider.RepairPolicy, error) {
	start := time.Now()
	out, err := d.CloudProvider.RepairPolicies(ctx, np)
	pool := ""
	if np != nil {
		pool = np.Name
	}
	d.observe("RepairPolicies", pool, start, err)
	return out, err
}

// rebootingCloud times the Reboot of a provider that has one.
type rebootingCloud struct {
	d        *decorated
	rebooter cloudprovider.Rebooter
}

func (r rebootingCloud) Reboot(ctx context.Context, nc *karpv1.NodeClaim, operationID string) error {
	start := time.Now()
	err := r.rebooter.Reboot(ctx, nc, operationID)
	r.d.observe("Reboot", nodePoolOf(nc), start, err)
	return err
}
