package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/karpenter-policy/karpenter/cmd/karpenter/options"
	"github.com/karpenter-policy/karpenter/controllers/interruption"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/nodeclass"
	awsprovider "github.com/karpenter-policy/karpenter/providers/aws"
)

// newAWS builds the AWS provider from the flags: the SDK's configuration for the region and
// endpoint, the cluster's Kubernetes version from the API server (for AMI aliases) and its
// CA (for node user data), pricing
// starting from the built-in table, and instance types cached for --instance-types-ttl.
func newAWS(mgr ctrl.Manager, opts *options.Options) (*awsprovider.Provider, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the API server's version (for AMI aliases): %w", err)
	}
	// Nodes trust the CA the manager trusts for the API server (its in-cluster config's).
	ca := mgr.GetConfig().CAData
	if len(ca) == 0 && mgr.GetConfig().CAFile != "" {
		if ca, err = os.ReadFile(mgr.GetConfig().CAFile); err != nil {
			return nil, fmt.Errorf("reading the API server's CA for node user data: %w", err)
		}
	}
	s := awsprovider.Settings{ClusterName: opts.ClusterName, ClusterEndpoint: opts.ClusterEndpoint, Region: opts.AWSRegion,
		InterruptionQueue: opts.InterruptionQueue, IsolatedVPC: opts.IsolatedVPC,
		KubernetesVersion: v.Major + "." + strings.TrimRight(v.Minor, "+"), ClusterCABundle: base64.StdEncoding.EncodeToString(ca)}
	if opts.ClusterCABundle != "" {
		s.ClusterCABundle = opts.ClusterCABundle
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	clients, err := awsprovider.NewClients(context.Background(), s)
	if err != nil {
		return nil, err
	}
	pricing := awsprovider.NewPricing(clients, s.IsolatedVPC)
	log := ctrl.Log.WithName("aws")
	pricing.OnError = func(err error) { log.Error(err, "updating prices; keeping the ones known") }
	// A new manager's first decisions wait for spot prices: without them nothing is offered
	// as spot.
	pricing.HoldUntilFirstSpot()
	region, n := awsprovider.Fallback()
	log.Info("starting on the built-in on-demand prices until the Pricing API answers", "pricesOf", region, "instanceTypes", n, "region", clients.Region)
	if err := mgr.Add(pricing); err != nil {
		return nil, err
	}
	types := awsprovider.NewInstanceTypes(clients, pricing, opts.InstanceTypesTTL)
	types.Capacity = awsprovider.Capacity{VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent, ReservedENIs: opts.ReservedENIs}
	types.ReservedCapacity = opts.Gates["ReservedCapacity"]
	p := awsprovider.NewProvider(mgr.GetClient(), s, clients, types, pricing)
	p.Observe = awsprovider.Observer{
		Batch: func(name string, size int, window time.Duration) {
			metrics.BatcherBatchSize.WithLabelValues(name).Observe(float64(size))
			metrics.BatcherBatchTime.WithLabelValues(name).Observe(window.Seconds())
		},
		LaunchFailure: func(zone, zoneID, capacityType, reason string) {
			metrics.InstanceLaunchFailures.WithLabelValues(zone, zoneID, capacityType, reason).Inc()
		},
		TerminationFailure: func(zone, zoneID string) {
			metrics.InstanceTerminationFailures.WithLabelValues(zone, zoneID).Inc()
		},
		UserData: func(nodeClass string, bytes int) {
			metrics.EC2NodeClassUserDataBytes.WithLabelValues(nodeClass).Set(float64(bytes))
		},
		NodeClassGone: func(nodeClass string) {
			metrics.EC2NodeClassUserDataBytes.DeleteLabelValues(nodeClass)
		},
	}
	return p, nil
}

// registerAWS registers what only the AWS provider has: the EC2NodeClass controller, the
// poller of EC2's instance status checks (every minute, as upstream) and, with
// --interruption-queue, the consumer of the SQS queue.
func registerAWS(mgr ctrl.Manager, opts *options.Options, p *awsprovider.Provider, recorder events.EventRecorder) error {
	if err := nodeclass.NewEC2(mgr.GetClient(), p.Resolver).Register(mgr); err != nil {
		return fmt.Errorf("registering the EC2NodeClass controller: %w", err)
	}
	if err := mgr.Add(interruption.NewHealthPoller(mgr.GetClient(), p, p, recorder, time.Minute)); err != nil {
		return fmt.Errorf("registering the instance status poller: %w", err)
	}
	if opts.InterruptionQueue != "" {
		q := awsprovider.NewQueue(p.Resolver.Clients, opts.InterruptionQueue)
		if err := mgr.Add(interruption.NewQueueConsumer(mgr.GetClient(), p, q, recorder)); err != nil {
			return fmt.Errorf("registering the interruption queue consumer: %w", err)
		}
	}
	return nil
}
