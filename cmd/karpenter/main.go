// Command karpenter is the controller manager: it registers the API schemes, the controllers
// and the webhooks that exist, and runs them under leader election with health probes and
// Prometheus metrics.
package main

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap/zapcore"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/karpenter-policy/karpenter/api/install"
	"github.com/karpenter-policy/karpenter/cmd/karpenter/options"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "karpenter:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("karpenter", flag.ContinueOnError)
	opts, err := options.Parse(fs, os.Args[1:])
	if err != nil {
		return err
	}
	level := map[string]zapcore.Level{"debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "error": zapcore.ErrorLevel}[opts.LogLevel]
	ctrl.SetLogger(zap.New(zap.Level(level)))
	log := ctrl.Log.WithName("setup")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS = float32(opts.KubeClientQPS)
	cfg.Burst = opts.KubeClientBurst
	cfg.UserAgent = "karpenter"

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  install.NewScheme(),
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		LeaderElection:          opts.LeaderElect,
		LeaderElectionID:        opts.LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// Hand over quickly on shutdown; the next leader starts without waiting out the lease.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    opts.WebhookHost,
			Port:    opts.WebhookPort,
			CertDir: opts.WebhookCertDir,
		}),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
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
