package main

import (
	"crypto/tls"
	"net/http"
	"net/http/pprof"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/karpenter-policy/karpenter/cmd/karpenter/options"
)

// minTLS refuses TLS below 1.2 on every server the manager serves over TLS: the webhooks
// (reached by the API server) and the secure metrics endpoint.
func minTLS(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }

// webhookServer is the webhook server: TLS 1.2 at least.
func webhookServer(opts *options.Options) webhook.Server {
	return webhook.NewServer(webhook.Options{Host: opts.WebhookHost, Port: opts.WebhookPort, CertDir: opts.WebhookCertDir,
		TLSOpts: []func(*tls.Config){minTLS}})
}

// metricsServer is the metrics endpoint: with --metrics-secure (the chart's default), HTTPS
// with TLS 1.2 at least, each request's bearer token authenticated (TokenReview) and
// authorized for GET on the /metrics non-resource URL (SubjectAccessReview); without, plain
// HTTP, which `make run` binds to loopback only.
func metricsServer(opts *options.Options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsBindAddress}
	if opts.EnableProfiling {
		// Upstream's ENABLE_PROFILING: Go's pprof handlers beside /metrics, behind the same
		// authentication and authorization when the endpoint is secure.
		o.ExtraHandlers = map[string]http.Handler{
			"/debug/pprof/":        http.HandlerFunc(pprof.Index),
			"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
			"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
			"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
			"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
		}
	}
	if opts.MetricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.TLSOpts = []func(*tls.Config){minTLS}
		o.CertDir = opts.MetricsCertDir
	}
	return o
}
