// Command karpenter is the controller manager: it registers the API schemes, the controllers
// and the webhooks that exist, and runs them under leader election with health probes and
// Prometheus metrics.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/karpenter-policy/karpenter/api/install"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cmd/karpenter/options"
	"github.com/karpenter-policy/karpenter/controllers/audit"
	budgetcontrollers "github.com/karpenter-policy/karpenter/controllers/budget"
	"github.com/karpenter-policy/karpenter/controllers/capacitybuffer"
	"github.com/karpenter-policy/karpenter/controllers/disruption"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/interruption"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	instancetypemetrics "github.com/karpenter-policy/karpenter/controllers/metrics/instancetype"
	nodemetrics "github.com/karpenter-policy/karpenter/controllers/metrics/node"
	podmetrics "github.com/karpenter-policy/karpenter/controllers/metrics/pod"
	nodetermination "github.com/karpenter-policy/karpenter/controllers/node/termination"
	"github.com/karpenter-policy/karpenter/controllers/nodeclaim/consistency"
	nodeclaimdisruption "github.com/karpenter-policy/karpenter/controllers/nodeclaim/disruption"
	"github.com/karpenter-policy/karpenter/controllers/nodeclaim/expiration"
	"github.com/karpenter-policy/karpenter/controllers/nodeclaim/garbagecollection"
	"github.com/karpenter-policy/karpenter/controllers/nodeclaim/lifecycle"
	"github.com/karpenter-policy/karpenter/controllers/nodeclaim/reboot"
	nodeclaimtermination "github.com/karpenter-policy/karpenter/controllers/nodeclaim/termination"
	"github.com/karpenter-policy/karpenter/controllers/nodeclass"
	"github.com/karpenter-policy/karpenter/controllers/nodeoverlay"
	"github.com/karpenter-policy/karpenter/controllers/nodepool"
	policycontrollers "github.com/karpenter-policy/karpenter/controllers/policy"
	"github.com/karpenter-policy/karpenter/controllers/provisioning"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/controllers/static"
	"github.com/karpenter-policy/karpenter/policies"
	awsprovider "github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/providers/kwok"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
	"github.com/karpenter-policy/karpenter/webhooks"
	"github.com/karpenter-policy/karpenter/webhooks/admission"
	"github.com/karpenter-policy/karpenter/webhooks/certs"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "karpenter:", err)
		os.Exit(1)
	}
}

// setUpSelfSignedCerts makes sure the webhook certificate exists before the webhook server
// starts, and keeps it renewed and injected afterwards.
func setUpSelfSignedCerts(mgr ctrl.Manager, cfg *rest.Config, opts *options.Options) error {
	direct, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	secretNS, secretName := options.NamespacedName(opts.WebhookCertSecret)
	svcNS, svcName := options.NamespacedName(opts.WebhookService)
	s := &certs.SelfSigned{
		Client: direct, Log: ctrl.Log.WithName("webhook-certs"),
		Secret:                        client.ObjectKey{Namespace: secretNS, Name: secretName},
		CertDir:                       opts.WebhookCertDir,
		DNSNames:                      []string{svcName + "." + svcNS + ".svc", svcName + "." + svcNS + ".svc.cluster.local"},
		IPs:                           opts.IPs(),
		WebhookConfigurations:         []string{opts.WebhookConfiguration},
		MutatingWebhookConfigurations: []string{opts.MutatingWebhookConfiguration},
		CRDs:                          []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"},
		Validity:                      365 * 24 * time.Hour, RenewBefore: 30 * 24 * time.Hour, Interval: time.Hour,
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Ensure(ctx); err != nil {
		return fmt.Errorf("setting up the self-signed webhook certificate: %w", err)
	}
	return mgr.Add(s)
}

// deps are what the controllers and the webhooks share.
type deps struct {
	cloud   cloudprovider.CloudProvider
	cluster *state.Cluster
	engine  *policies.Engine
	usage   *state.Attribution
	// buffers are the CapacityBuffers' virtual pods (the CapacityBuffer gate); nil: off.
	buffers *capacitybuffer.Store
}

// newDeps builds the cloud provider, the cluster state and the policy engine.
func newDeps(mgr ctrl.Manager, opts *options.Options) (*deps, error) {
	var cloud cloudprovider.CloudProvider
	switch opts.CloudProvider {
	case "kwok":
		cloud = kwok.New(mgr.GetClient(), clock.RealClock{}, time.Now().UnixNano())
	case "aws":
		p, err := newAWS(mgr, opts)
		if err != nil {
			return nil, err
		}
		cloud = p
	default:
		return nil, fmt.Errorf("--cloud-provider=%s is not built into this manager; use kwok or aws", opts.CloudProvider)
	}
	engine, err := policies.NewEngine()
	if err != nil {
		return nil, err
	}
	engine.Observer = metrics.PolicyObserver{}
	engine.EvalTimeout = opts.PolicyEvaluationTimeout
	cluster := state.NewCluster(mgr.GetClient(), clock.RealClock{}).WithDisplacedGrace(opts.DisplacedPodGrace)
	if opts.Gates["NodeOverlay"] {
		cluster.WithNodeOverlays()
		// A launch buys what the decision chose: at the overlaid prices.
		switch p := cloud.(type) {
		case *kwok.Provider:
			p.WithOverlays(cluster.LaunchOverlays)
		case *awsprovider.Provider:
			p.Overlays = cluster.LaunchOverlays
		}
	}
	var buffers *capacitybuffer.Store
	if opts.Gates["CapacityBuffer"] {
		buffers = capacitybuffer.NewStore()
		cluster.WithBuffers(buffers.Pods)
	}
	metrics.SetPolicyBlockedSource(cluster.PolicyBlocks().PolicyBlockedByNamespace)
	metrics.SetClusterStateSource(metrics.ClusterStateSource{NodeCount: cluster.NodeCount, Synced: cluster.Synced})
	if err := cluster.Register(context.Background(), mgr.GetCache()); err != nil {
		return nil, fmt.Errorf("feeding the cluster model from the informers: %w", err)
	}
	return &deps{cloud: cloud, cluster: cluster, engine: engine, usage: state.NewAttribution(cluster, cloud, clock.RealClock{}), buffers: buffers}, nil
}

// metered is the provider as a controller calls it: each call timed and each error counted
// under the controller's name (karpenter_cloudprovider_duration_seconds, _errors_total).
func metered(cloud cloudprovider.CloudProvider, controller string) cloudprovider.CloudProvider {
	return metrics.DecorateCloud(cloud, controller)
}

// registerControllers registers the controllers that exist, with their dependencies injected.
func registerControllers(mgr ctrl.Manager, opts *options.Options, d *deps) error {
	cloud, cluster := d.cloud, d.cluster
	recorder := mgr.GetEventRecorder("karpenter")
	if err := index.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("registering the cache indexes: %w", err)
	}
	prov := provisioning.NewProvisioner(mgr.GetClient(), cluster, metered(cloud, "provisioner"), recorder, clock.RealClock{}, opts.BatchIdleDuration, opts.BatchMaxDuration).
		WithPolicies(d.engine).WithScheduling(scheduling(opts))
	if d.buffers != nil {
		prov.WithBuffers(d.buffers.Placed)
		// A buffer that changed is new work for the provisioner, and for disruption (its room
		// is not empty while it is kept).
		changed := func() { cluster.BuffersChanged(); prov.Trigger() }
		if err := capacitybuffer.NewController(mgr.GetClient(), d.buffers, changed).Register(mgr); err != nil {
			return fmt.Errorf("registering the capacitybuffer controller: %w", err)
		}
	}
	if err := prov.Register(mgr); err != nil {
		return fmt.Errorf("registering the provisioner: %w", err)
	}
	if kp, ok := cloud.(*kwok.Provider); ok {
		if err := mgr.Add(kp.Interrupter(recorder)); err != nil {
			return fmt.Errorf("registering the kwok spot interruption injector: %w", err)
		}
		if err := mgr.Add(kp.Registrar()); err != nil {
			return fmt.Errorf("registering the kwok node registrar: %w", err)
		}
	}
	if err := policycontrollers.NewEngineSync(mgr.GetClient(), d.engine).Register(mgr); err != nil {
		return fmt.Errorf("registering the policy engine sync: %w", err)
	}
	if err := policycontrollers.NewPolicyStatus(mgr.GetClient(), d.engine).Register(mgr); err != nil {
		return fmt.Errorf("registering the capacitypolicy status controller: %w", err)
	}
	metrics.SetShowbackSource(budgetcontrollers.ShowbackSource(d.usage, mgr.Elected(), opts.ShowbackTeamLabel, opts.ShowbackMaxNamespaces))
	if err := mgr.Add(audit.NewController(mgr.GetClient(), cluster, metered(cloud, "audit"), d.engine, clock.RealClock{}, opts.AuditInterval)); err != nil {
		return fmt.Errorf("registering the audit controller: %w", err)
	}
	if err := policycontrollers.NewExceptionStatus(mgr.GetClient(), recorder, clock.RealClock{}).Register(mgr); err != nil {
		return fmt.Errorf("registering the capacityexception status controller: %w", err)
	}
	if err := budgetcontrollers.NewNamespaceGate(mgr.GetClient()).Register(mgr); err != nil {
		return fmt.Errorf("registering the capacitybudget gate controller: %w", err)
	}
	budgetStatus := budgetcontrollers.NewBudgetStatus(mgr.GetClient(), cluster, d.usage, d.engine, clock.RealClock{}).WithRecorder(recorder)
	if err := budgetStatus.Register(mgr); err != nil {
		return fmt.Errorf("registering the capacitybudget status controller: %w", err)
	}
	if err := budgetcontrollers.NewClusterBudgetStatus(budgetStatus).Register(mgr); err != nil {
		return fmt.Errorf("registering the clustercapacitybudget status controller: %w", err)
	}
	if err := lifecycle.NewController(mgr.GetClient(), metered(cloud, "nodeclaim.lifecycle"), recorder, clock.RealClock{}).WithValidation(validation.New().NodeClaim).WithRegistrations(cluster).Register(mgr); err != nil {
		return fmt.Errorf("registering the nodeclaim lifecycle: %w", err)
	}
	if err := nodeclaimtermination.NewController(mgr.GetClient(), metered(cloud, "nodeclaim.termination"), recorder, clock.RealClock{}).Register(mgr); err != nil {
		return fmt.Errorf("registering the nodeclaim termination controller: %w", err)
	}
	nodeTermination := nodetermination.NewController(mgr.GetClient(), metered(cloud, "node.termination"), recorder, clock.RealClock{})
	if err := nodeTermination.Register(mgr); err != nil {
		return fmt.Errorf("registering the node termination controller: %w", err)
	}
	// It runs whatever the feature gates: a reboot committed before a restart with node
	// repair turned off still ends, with its fence removed.
	if err := reboot.NewController(mgr.GetClient(), metered(cloud, "nodeclaim.reboot"), nodeTermination.Queue(), recorder, clock.RealClock{}).Register(mgr); err != nil {
		return fmt.Errorf("registering the nodeclaim reboot controller: %w", err)
	}
	if err := mgr.Add(garbagecollection.NewController(mgr.GetClient(), cluster, mgr.GetAPIReader(), metered(cloud, "nodeclaim.garbagecollection"), clock.RealClock{})); err != nil {
		return fmt.Errorf("registering the garbage collector: %w", err)
	}
	if err := podmetrics.NewController(mgr.GetClient(), clock.RealClock{}).WithDecisions(cluster.Decisions()).Register(mgr); err != nil {
		return fmt.Errorf("registering the pod metrics controller: %w", err)
	}
	if err := mgr.Add(nodemetrics.NewController(cluster, clock.RealClock{})); err != nil {
		return fmt.Errorf("registering the node metrics controller: %w", err)
	}
	if err := mgr.Add(instancetypemetrics.NewController(cluster, metered(cloud, "metrics.instancetype"), clock.RealClock{})); err != nil {
		return fmt.Errorf("registering the instance type metrics controller: %w", err)
	}
	if err := expiration.NewController(mgr.GetClient(), clock.RealClock{}).Register(mgr); err != nil {
		return fmt.Errorf("registering the nodeclaim expiration controller: %w", err)
	}
	if err := consistency.NewController(mgr.GetClient(), recorder, clock.RealClock{}).Register(mgr); err != nil {
		return fmt.Errorf("registering the nodeclaim consistency controller: %w", err)
	}
	if err := nodeclaimdisruption.NewController(mgr.GetClient(), metered(cloud, "nodeclaim.disruption"), cluster, clock.RealClock{}).Register(mgr); err != nil {
		return fmt.Errorf("registering the nodeclaim disruption-conditions controller: %w", err)
	}
	if err := interruption.NewController(mgr.GetClient(), metered(cloud, "interruption"), recorder).Register(mgr); err != nil {
		return fmt.Errorf("registering the interruption controller: %w", err)
	}
	if opts.Gates["StaticCapacity"] {
		sc := static.NewController(mgr.GetClient(), metered(cloud, "nodepool.static"), recorder, clock.RealClock{}).
			WithTerminateFirstDrift(opts.Gates["TerminateFirstDrift"])
		if opts.Gates["NodeOverlay"] {
			sc.WithOverlays(cluster.LaunchOverlays)
		}
		if err := sc.Register(mgr); err != nil {
			return fmt.Errorf("registering the static nodepool controller: %w", err)
		}
	}
	if opts.Gates["NodeOverlay"] {
		if err := nodeoverlay.NewController(mgr.GetClient(), metered(cloud, "nodeoverlay.status")).Register(mgr); err != nil {
			return fmt.Errorf("registering the nodeoverlay status controller: %w", err)
		}
	}
	if opts.Disruption {
		dopts := methods.Options{MinSavingsFraction: opts.ConsolidationMinSavings, Scheduling: scheduling(opts)}.WithFeatureGates(opts.Gates)
		dc := disruption.NewController(mgr.GetClient(), metered(cloud, "disruption"), cluster, recorder, clock.RealClock{}, d.engine, dopts)
		if err := dc.Orchestrator.Register(mgr); err != nil {
			return fmt.Errorf("registering the disruption orchestrator: %w", err)
		}
		if err := mgr.Add(dc); err != nil {
			return fmt.Errorf("registering the disruption controller: %w", err)
		}
	}
	if err := nodepool.NewController(mgr.GetClient(), metered(cloud, "nodepool.status"), cluster).WithValidation(validation.New().NodePool).Register(mgr); err != nil {
		return fmt.Errorf("registering the nodepool status controller: %w", err)
	}
	if err := nodepool.NewHashController(mgr.GetClient()).Register(mgr); err != nil {
		return fmt.Errorf("registering the nodepool hash controller: %w", err)
	}
	switch p := cloud.(type) {
	case *kwok.Provider:
		if err := nodeclass.NewKWOK(mgr.GetClient(), cloud).Register(mgr); err != nil {
			return fmt.Errorf("registering the kwok node class controller: %w", err)
		}
	case *awsprovider.Provider:
		if err := registerAWS(mgr, opts, p, recorder); err != nil {
			return err
		}
	}
	return nil
}

func run() error {
	fs := flag.NewFlagSet("karpenter", flag.ContinueOnError)
	opts, err := options.Parse(fs, os.Args[1:])
	if err != nil {
		return err
	}
	if err := setUpLogging(opts); err != nil {
		return err
	}
	applyMemoryLimit(opts)
	log := ctrl.Log.WithName("setup")
	if opts.Explicit("cpu-requests") {
		log.Info("CPU_REQUESTS (--cpu-requests) is accepted for upstream's values but has no effect here: nothing is sized by it (docs/upstream.md)")
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS = float32(opts.KubeClientQPS)
	cfg.Burst = opts.KubeClientBurst
	cfg.UserAgent = "karpenter"

	if opts.EnableWebhooks && opts.WebhookCertMode == "self-signed" && opts.WebhookCertDir == "" {
		opts.WebhookCertDir = filepath.Join(os.TempDir(), "karpenter-webhook-certs")
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  install.NewScheme(),
		Metrics:                 metricsServer(opts),
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		PprofBindAddress:        opts.ProfilingBindAddress,
		LeaderElection:          opts.LeaderElect,
		LeaderElectionID:        opts.LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// Hand over quickly on shutdown; the next leader starts without waiting out the lease.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhookServer(opts),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	d, err := newDeps(mgr, opts)
	if err != nil {
		return err
	}
	if opts.EnableWebhooks {
		if opts.WebhookCertMode == "self-signed" {
			if err := setUpSelfSignedCerts(mgr, cfg, opts); err != nil {
				return err
			}
		}
		if err := mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return fmt.Errorf("adding webhook readiness check: %w", err)
		}
		conv := &conversion.Converter{DefaultNodeClass: conversion.KWOKNodeClass}
		if opts.CloudProvider == "aws" {
			conv.DefaultNodeClass = conversion.EC2NodeClass
		}
		facts := &webhooks.ClusterFacts{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cloud: d.cloud, Attribution: d.usage}
		review := webhooks.NewClusterReview(admission.New(d.engine, facts, clock.RealClock{}.Now).
			WithNodeRepair(opts.Disruption && opts.Gates["NodeRepair"]).WithStaticCapacity(opts.Gates["StaticCapacity"]).
			WithNodeOverlay(opts.Gates["NodeOverlay"]).WithCapacityBuffer(opts.Gates["CapacityBuffer"]))
		v := validation.New()
		v.MaxExceptionDuration = opts.MaxExceptionDuration
		if err := webhooks.Register(mgr, conv, v, review); err != nil {
			return fmt.Errorf("registering webhooks: %w", err)
		}
	}
	if err := registerControllers(mgr, opts, d); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	log.Info("starting manager", "cloudProvider", opts.CloudProvider, "leaderElect", opts.LeaderElect,
		"metricsBindAddress", opts.MetricsBindAddress, "healthProbeBindAddress", opts.HealthProbeBindAddress)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}
