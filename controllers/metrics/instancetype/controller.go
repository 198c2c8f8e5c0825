// Package instancetype exports upstream Karpenter's instance-type gauges, as its AWS provider
// does, from what the cloud provider offers each NodePool, every minute:
// karpenter_cloudprovider_instance_type_offering_available and
// karpenter_cloudprovider_instance_type_offering_price_estimate by instance type, capacity
// type and zone, and karpenter_cloudprovider_instance_type_cpu_cores and
// karpenter_cloudprovider_instance_type_memory_bytes by instance type. Prices are the
// provider's, before NodeOverlays. A series no NodePool offers any more is deleted at the
// next pass. It reads the model's NodePools and asks the provider; it writes nothing to the
// API server.
package instancetype

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// Interval is how often the gauges are rebuilt, as upstream's AWS metrics controller.
const Interval = time.Minute

// Model is what the controller reads: the cluster model's objects.
type Model interface {
	Synced() bool
	Objects() *snapshot.Objects
}

// Controller rebuilds the instance-type gauges every Interval.
type Controller struct {
	model  Model
	cloud  cloudprovider.CloudProvider
	clock  clock.Clock
	series *metrics.Series
}

// NewController builds the instance-type metrics controller.
func NewController(model Model, cloud cloudprovider.CloudProvider, clk clock.Clock) *Controller {
	return &Controller{model: model, cloud: cloud, clock: clk, series: metrics.NewSeries(nil)}
}

// NeedLeaderElection is true, as upstream's: one replica asks the provider.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start rebuilds the gauges until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	for {
		if c.model.Synced() {
			if err := c.Pass(ctx); err != nil {
				log.FromContext(ctx).Error(err, "instance type metrics")
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(Interval):
		}
	}
}

// Pass rebuilds the gauges from the provider's instance types for every NodePool. A NodePool
// whose types cannot be read is left out and named in the error; the others' series are
// still set, and a series of that NodePool's types is kept rather than deleted, as the types
// are unknown, not gone.
func (c *Controller) Pass(ctx context.Context) error {
	type offering struct{ instanceType, capacityType, zone string }
	available := map[offering]bool{}
	price := map[offering]float64{}
	cpu, memory := map[string]float64{}, map[string]float64{}
	var errs []error
	for _, np := range c.model.Objects().NodePools {
		types, err := c.cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			errs = append(errs, fmt.Errorf("NodePool %s: %w", np.Name, err))
			continue
		}
		for _, it := range types {
			if q, ok := it.Capacity[corev1.ResourceCPU]; ok {
				cpu[it.Name] = q.AsApproximateFloat64()
			}
			if q, ok := it.Capacity[corev1.ResourceMemory]; ok {
				memory[it.Name] = q.AsApproximateFloat64()
			}
			for _, o := range it.Offerings {
				k := offering{it.Name, o.CapacityType, o.Zone}
				// Available in any NodePool's view is available; the price is the offering's.
				available[k] = available[k] || o.Available
				price[k] = o.Price
			}
		}
	}
	gauge := c.series.Set
	for k, ok := range available {
		labels := prometheus.Labels{"instance_type": k.instanceType, "capacity_type": k.capacityType, "zone": k.zone}
		v := 0.0
		if ok {
			v = 1
		}
		gauge(metrics.InstanceTypeOfferingAvailable, labels, v)
		gauge(metrics.InstanceTypeOfferingPrice, labels, price[k])
	}
	for name, v := range cpu {
		gauge(metrics.InstanceTypeCPU, prometheus.Labels{"instance_type": name}, v)
	}
	for name, v := range memory {
		gauge(metrics.InstanceTypeMemory, prometheus.Labels{"instance_type": name}, v)
	}
	if len(errs) == 0 {
		c.series.Flush()
	} else {
		c.series.Keep()
	}
	return errors.Join(errs...)
}
