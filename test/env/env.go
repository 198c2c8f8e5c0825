// Package env starts the integration test environment: a real kube-apiserver and etcd
// (controller-runtime envtest) with every CRD of this project installed. Every integration
// suite starts it through Start, so that they all test the same manifests.
//
// The binaries come from KUBEBUILDER_ASSETS, which `make envtest` sets from
// hack/kube-binaries.sh. Without it Start fails the suite: it never skips.
package env

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/karpenter-policy/karpenter/api/install"
)

// Environment is a running kube-apiserver and etcd with the CRDs installed.
type Environment struct {
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme
	// CRDs are the CustomResourceDefinitions as installed.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	testEnv *envtest.Environment
}

// Option changes how the environment starts.
type Option func(*envtest.Environment)

// WithWebhooks serves the CRDs' conversion webhooks and the given webhook configurations from
// a local server; envtest fills in its host, port and CA (see WebhookInstallOptions).
func WithWebhooks(o envtest.WebhookInstallOptions) Option {
	return func(e *envtest.Environment) {
		o.IgnoreSchemeConvertible = true
		e.WebhookInstallOptions = o
	}
}

// RepoRoot is the repository's root directory, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// CRDDir is where the generated CRDs live.
func CRDDir() string { return filepath.Join(RepoRoot(), "config", "crd", "bases") }

// Start starts kube-apiserver and etcd and installs the CRDs. Call Stop when done.
func Start(opts ...Option) (*Environment, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the suite with 'make envtest', " +
			"or export KUBEBUILDER_ASSETS=$(hack/kube-binaries.sh)")
	}
	scheme := install.NewScheme()
	testEnv := &envtest.Environment{
		Scheme:                   scheme,
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        []string{CRDDir()},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	for _, o := range opts {
		o(testEnv)
	}
	cfg, err := testEnv.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest with assets %s: %w", assets, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = testEnv.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Environment{Config: cfg, Client: c, Scheme: scheme, CRDs: testEnv.CRDs, testEnv: testEnv}, nil
}

// WebhookInstallOptions are the options envtest filled in (local host, port, CA, cert dir),
// for a webhook server started by the suite.
func (e *Environment) WebhookInstallOptions() *envtest.WebhookInstallOptions {
	return &e.testEnv.WebhookInstallOptions
}

// Stop stops the API server and etcd.
func (e *Environment) Stop() error { return e.testEnv.Stop() }

// Cleanup deletes every object of the given list type, for suites that share one environment
// between tests.
func (e *Environment) Cleanup(ctx context.Context, objs ...client.Object) error {
	for _, o := range objs {
		if err := e.Client.DeleteAllOf(ctx, o); err != nil {
			return fmt.Errorf("deleting all %T: %w", o, err)
		}
	}
	return nil
}

// Run is a suite's TestMain: it starts the environment into *e, runs the tests, stops it and
// returns the exit code for os.Exit.
func Run(m interface{ Run() int }, e **Environment, opts ...Option) int {
	var err error
	if *e, err = Start(opts...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := (*e).Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	return code
}
