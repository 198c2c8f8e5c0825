// Package webhooks_test runs the conversion and validating webhooks in a manager against a
// real kube-apiserver: objects written at one version read back at the other, and invalid
// objects are refused by the webhooks with the field named.
package webhooks_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/karpenter-policy/karpenter/test/env"
	"github.com/karpenter-policy/karpenter/webhooks"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

var testEnv *env.Environment

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	testEnv, err = env.Start(env.WithWebhooks(envtest.WebhookInstallOptions{
		Paths: []string{filepath.Join(env.RepoRoot(), "config", "webhook", "manifests.yaml")},
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	w := testEnv.WebhookInstallOptions()
	mgr, err := ctrl.NewManager(testEnv.Config, ctrl.Options{
		Scheme:  testEnv.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir,
		}),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := webhooks.Register(mgr, &conversion.Converter{DefaultNodeClass: conversion.KWOKNodeClass}, validation.New(), nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	// Wait until the webhook server answers TLS.
	addr := net.JoinHostPort(w.LocalServingHost, strconv.Itoa(w.LocalServingPort))
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe only
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "webhook server did not start:", err)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
	return m.Run()
}
