package options

import (
	"flag"
	"strings"
	"testing"
)

// upstreamV114Gates is the FEATURE_GATES string upstream's v1.14 chart renders by default;
// UpstreamFeatureGates is v1.15's.
const upstreamV114Gates = "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"

func TestUpstreamDefaultGatesStartTheManager(t *testing.T) {
	for _, s := range []string{upstreamV114Gates, UpstreamFeatureGates(), ""} {
		t.Setenv("FEATURE_GATES", s)
		o, err := Parse(flag.NewFlagSet("t", flag.ContinueOnError), nil)
		if err != nil {
			t.Fatalf("FEATURE_GATES=%q: %v", s, err)
		}
		if !o.Gates["ReservedCapacity"] || o.Gates["NodeRepair"] || o.Gates["SpotToSpotConsolidation"] {
			t.Errorf("FEATURE_GATES=%q: %v", s, o.Gates)
		}
		// StaticCapacity is on here unless the string turns it off, as upstream's does.
		if want := s == ""; o.Gates["StaticCapacity"] != want {
			t.Errorf("FEATURE_GATES=%q: StaticCapacity=%t, want %t", s, o.Gates["StaticCapacity"], want)
		}
	}
	if !strings.Contains(UpstreamFeatureGates(), "TerminateFirstDrift=false") || !strings.HasPrefix(UpstreamFeatureGates(), upstreamV114Gates) {
		t.Errorf("upstream's v1.15 default is v1.14's and the new gates, off: %s", UpstreamFeatureGates())
	}
}

func TestFeatureGateErrors(t *testing.T) {
	for s, want := range map[string]string{
		"NodeRepairr=true":               `unknown feature gate "NodeRepairr"`,
		"NodeRepair":                     "want NodeRepair=true or NodeRepair=false",
		"NodeRepair=yes":                 `NodeRepair="yes": the value must be true or false`,
		"PodDeletionCostManagement=true": "PodDeletionCostManagement=true",
	} {
		_, err := ParseFeatureGates(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want an error with %q, got %v", s, want, err)
		}
	}
	for _, built := range []string{"CapacityBuffer", "TerminateFirstDrift"} {
		if g, err := ParseFeatureGates(built + "=true"); err != nil || !g[built] {
			t.Errorf("%s is built: %v %v", built, g, err)
		}
	}
	g, err := ParseFeatureGates(" NodeRepair=true , TerminateFirstRepair=TRUE,SpotToSpotConsolidation=true,SpotToSpotConsolidation=false")
	if err != nil {
		t.Fatal(err)
	}
	if !g["NodeRepair"] || !g["TerminateFirstRepair"] || g["SpotToSpotConsolidation"] {
		t.Errorf("got %v", g)
	}
}

func TestUpstreamSettingNames(t *testing.T) {
	env := map[string]string{
		"METRICS_PORT": "9090", "HEALTH_PROBE_PORT": "9091", "LEADER_ELECTION_NAME": "lease-x", "LEADER_ELECTION_NAMESPACE": "karpenter",
		"DISABLE_LEADER_ELECTION": "true", "KARPENTER_SERVICE": "karpenter", "MEMORY_LIMIT": "1073741824", "CPU_REQUESTS": "0",
		"LOG_LEVEL": "debug", "LOG_OUTPUT_PATHS": "stdout", "LOG_ERROR_OUTPUT_PATHS": "stderr", "BATCH_MAX_DURATION": "20s",
		"BATCH_IDLE_DURATION": "2s", "PREFERENCE_POLICY": "Ignore", "MIN_VALUES_POLICY": "BestEffort", "KUBE_CLIENT_QPS": "50",
		"KUBE_CLIENT_BURST": "60", "CLUSTER_NAME": "c", "CLUSTER_ENDPOINT": "https://c", "CLUSTER_CA_BUNDLE": "Y2E=",
		"INTERRUPTION_QUEUE": "q", "ISOLATED_VPC": "true", "RESERVED_ENIS": "1", "VM_MEMORY_OVERHEAD_PERCENT": "0.1",
		"ENABLE_PROFILING": "true", "DISABLE_CONTROLLER_WARMUP": "true", "IGNORE_DRA_REQUESTS": "true", "LEGACY_NODE_REPAIR": "false",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	o, err := Parse(flag.NewFlagSet("t", flag.ContinueOnError), nil)
	if err != nil {
		t.Fatal(err)
	}
	for what, ok := range map[string]bool{
		"metrics address":  o.MetricsBindAddress == ":9090",
		"probe address":    o.HealthProbeBindAddress == ":9091",
		"lease name":       o.LeaderElectionID == "lease-x" && o.LeaderElectionNamespace == "karpenter",
		"leader election":  !o.LeaderElect,
		"webhook service":  o.WebhookService == "karpenter",
		"memory limit":     o.MemoryLimit == 1<<30,
		"cpu requests":     o.CPURequests == 1000,
		"log level":        o.LogLevel == "debug",
		"batching":         o.BatchMaxDuration.String() == "20s" && o.BatchIdleDuration.String() == "2s",
		"policies":         o.PreferencePolicy == PreferencePolicyIgnore && o.MinValuesPolicy == MinValuesPolicyBestEffort,
		"client":           o.KubeClientQPS == 50 && o.KubeClientBurst == 60,
		"aws":              o.ClusterName == "c" && o.ClusterEndpoint == "https://c" && o.ClusterCABundle == "Y2E=" && o.InterruptionQueue == "q" && o.IsolatedVPC,
		"aws capacity":     o.ReservedENIs == 1 && o.VMMemoryOverheadPercent == 0.1,
		"profiling":        o.EnableProfiling,
		"explicit setting": o.Explicit("metrics-port") && !o.Explicit("webhook-port"),
	} {
		if !ok {
			t.Errorf("%s: not taken from upstream's variables: %+v", what, o)
		}
	}
	// This manager's own names win over upstream's when both are given.
	o, err = Parse(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--metrics-bind-address=127.0.0.1:1", "--leader-election-id=mine", "--webhook-service=svc"})
	if err != nil {
		t.Fatal(err)
	}
	if o.MetricsBindAddress != "127.0.0.1:1" || o.LeaderElectionID != "mine" || o.WebhookService != "svc" {
		t.Errorf("explicit names lost to upstream's: %+v", o)
	}
}

func TestUpstreamSettingsNotBuiltAreRefused(t *testing.T) {
	for env, want := range map[string]string{
		"LEGACY_NODE_REPAIR=true":                  "--legacy-node-repair (LEGACY_NODE_REPAIR): the legacy node repair controller is not built",
		"SCHEDULER_CONFIG=podTopologySpread: {}":   "--scheduler-config (SCHEDULER_CONFIG)",
		"DISABLE_CONTROLLER_WARMUP=false":          "controller warmup",
		"DISABLE_CLUSTER_STATE_OBSERVABILITY=true": "DISABLE_CLUSTER_STATE_OBSERVABILITY",
		"IGNORE_DRA_REQUESTS=false":                "DRA",
		"PREFERENCE_POLICY=respect":                `PREFERENCE_POLICY) must be Respect or Ignore, got "respect"`,
		"MIN_VALUES_POLICY=Lax":                    "MIN_VALUES_POLICY",
		"FEATURE_GATES=Foo=true":                   `FEATURE_GATES): unknown feature gate "Foo"`,
		"MEMORY_LIMIT=0":                           "MEMORY_LIMIT",
		"CLUSTER_CA_BUNDLE=not base64!":            "CLUSTER_CA_BUNDLE",
		"VM_MEMORY_OVERHEAD_PERCENT=7.5":           "VM_MEMORY_OVERHEAD_PERCENT",
		"METRICS_PORT=eighty":                      "METRICS_PORT",
	} {
		k, v, _ := strings.Cut(env, "=")
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, v)
			_, err := Parse(flag.NewFlagSet("t", flag.ContinueOnError), nil)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: want an error with %q, got %v", env, want, err)
			}
		})
	}
}
