// Package options holds the controller manager's settings: every flag, with an environment
// variable fallback, in one place. It parses and validates; it starts nothing.
package options

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Options are the controller manager's settings.
type Options struct {
	MetricsBindAddress           string
	HealthProbeBindAddress       string
	ProfilingBindAddress         string
	LeaderElect                  bool
	LeaderElectionID             string
	LeaderElectionNamespace      string
	KubeClientQPS                float64
	KubeClientBurst              int
	WebhookHost                  string
	WebhookPort                  int
	WebhookCertDir               string
	WebhookCertMode              string
	WebhookCertSecret            string
	WebhookService               string
	WebhookCertIPs               string
	WebhookConfiguration         string
	MutatingWebhookConfiguration string
	EnableWebhooks               bool
	CloudProvider                string
	BatchIdleDuration            time.Duration
	BatchMaxDuration             time.Duration
	DisplacedPodGrace            time.Duration
	PolicyEvaluationTimeout      time.Duration
	MaxExceptionDuration         time.Duration
	AuditInterval                time.Duration
	// ShowbackTeamLabel is the namespace label whose value names a namespace's team in the
	// showback metrics; ShowbackMaxNamespaces bounds their cardinality.
	ShowbackTeamLabel     string
	ShowbackMaxNamespaces int
	MetricsSecure         bool
	MetricsCertDir        string
	LogLevel              string
	// Disruption runs the disruption controller (consolidation, drift, expiration).
	Disruption bool
	// FeatureGates are the feature gates as given, "Name=true,..."; Gates, parsed.
	FeatureGates string
	Gates        FeatureGates

	// Upstream's settings (docs/upstream.md, "Settings"). The ports stand in for the bind
	// addresses, and the leader election name and Karpenter Service for this manager's
	// own names, when those are not given.
	MetricsPort, HealthProbePort int
	LeaderElectionName           string
	DisableLeaderElection        bool
	KarpenterService             string
	// MemoryLimit, in bytes, sets Go's soft memory limit to 90% of it; -1 leaves it alone.
	MemoryLimit int64
	// CPURequests is the container's CPU request in millicores (upstream sizes its
	// scheduler's concurrency by it; see docs/upstream.md).
	CPURequests                      int64
	LogOutputPaths                   string
	LogErrorOutputPaths              string
	PreferencePolicy                 string
	MinValuesPolicy                  string
	EnableProfiling                  bool
	DisableControllerWarmup          bool
	DisableClusterStateObservability bool
	IgnoreDRARequests                bool
	LegacyNodeRepair                 bool
	SchedulerConfig                  string
	// ConsolidationMinSavings is the least fraction of a node's price a consolidation
	// replacement must save.
	ConsolidationMinSavings float64
	// AWS provider settings (docs/aws.md, "Settings").
	ClusterName       string
	ClusterEndpoint   string
	AWSRegion         string
	InterruptionQueue string
	IsolatedVPC       bool
	InstanceTypesTTL  time.Duration
	// ClusterCABundle is the API server's CA (PEM, base64) nodes trust; empty takes the
	// manager's own.
	ClusterCABundle string
	// ReservedENIs are ENIs per instance kept from the VPC CNI's pods (maxPods).
	ReservedENIs int
	// VMMemoryOverheadPercent of a type's memory is taken as the hypervisor's.
	VMMemoryOverheadPercent float64

	// explicit are the settings given by flag or environment, by flag name.
	explicit map[string]bool
}

// Preference and minValues policies (PREFERENCE_POLICY, MIN_VALUES_POLICY), as upstream.
const (
	PreferencePolicyRespect   = "Respect"
	PreferencePolicyIgnore    = "Ignore"
	MinValuesPolicyStrict     = "Strict"
	MinValuesPolicyBestEffort = "BestEffort"
)

// envName is the environment variable that stands in for a flag: --leader-elect reads
// LEADER_ELECT.
func envName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// AddFlags registers the flags on fs, with defaults taken from the environment when set.
// Environment values that do not parse are reported by Parse, naming the variable.
func (o *Options) AddFlags(fs *flag.FlagSet) *EnvErrors {
	errs := &EnvErrors{}
	o.explicit = map[string]bool{}
	lookup := func(name string) (string, bool) {
		v, ok := os.LookupEnv(envName(name))
		if ok {
			o.explicit[name] = true
		}
		return v, ok
	}
	str := func(p *string, name, def, usage string) {
		if v, ok := lookup(name); ok {
			def = v
		}
		fs.StringVar(p, name, def, usage+" (env "+envName(name)+")")
	}
	boolean := func(p *bool, name string, def bool, usage string) {
		if v, ok := lookup(name); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs.add(name, v, err)
			} else {
				def = b
			}
		}
		fs.BoolVar(p, name, def, usage+" (env "+envName(name)+")")
	}
	integer := func(p *int, name string, def int, usage string) {
		if v, ok := lookup(name); ok {
			i, err := strconv.Atoi(v)
			if err != nil {
				errs.add(name, v, err)
			} else {
				def = i
			}
		}
		fs.IntVar(p, name, def, usage+" (env "+envName(name)+")")
	}
	integer64 := func(p *int64, name string, def int64, usage string) {
		if v, ok := lookup(name); ok {
			i, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				errs.add(name, v, err)
			} else {
				def = i
			}
		}
		fs.Int64Var(p, name, def, usage+" (env "+envName(name)+")")
	}
	float := func(p *float64, name string, def float64, usage string) {
		if v, ok := lookup(name); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				errs.add(name, v, err)
			} else {
				def = f
			}
		}
		fs.Float64Var(p, name, def, usage+" (env "+envName(name)+")")
	}
	duration := func(p *time.Duration, name string, def time.Duration, usage string) {
		if v, ok := lookup(name); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs.add(name, v, err)
			} else {
				def = d
			}
		}
		fs.DurationVar(p, name, def, usage+" (env "+envName(name)+")")
	}

	str(&o.MetricsBindAddress, "metrics-bind-address", ":8080", "address the Prometheus metrics endpoint binds to; 0 disables it")
	boolean(&o.MetricsSecure, "metrics-secure", false, "serve metrics over HTTPS (TLS 1.2 at least) to callers whose bearer token may GET the /metrics non-resource URL (TokenReview, SubjectAccessReview); the chart turns it on")
	str(&o.MetricsCertDir, "metrics-cert-dir", "", "with --metrics-secure: directory holding tls.crt and tls.key; empty generates a self-signed certificate at start")
	str(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "address the /healthz and /readyz probes bind to")
	str(&o.ProfilingBindAddress, "profiling-bind-address", "", "address Go's pprof handlers (/debug/pprof/) bind to; empty disables them")
	boolean(&o.LeaderElect, "leader-elect", true, "elect a leader so that only one replica acts")
	str(&o.LeaderElectionID, "leader-election-id", "karpenter-leader-election", "name of the leader election Lease")
	str(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease; empty means the pod's namespace")
	float(&o.KubeClientQPS, "kube-client-qps", 200, "queries per second to the API server")
	integer(&o.KubeClientBurst, "kube-client-burst", 300, "burst of queries to the API server")
	str(&o.WebhookHost, "webhook-host", "", "address the webhook server binds to; empty means all interfaces")
	integer(&o.WebhookPort, "webhook-port", 9443, "port the webhook server listens on")
	str(&o.WebhookCertDir, "webhook-cert-dir", "", "directory holding tls.crt and tls.key for the webhook server")
	str(&o.WebhookCertMode, "webhook-cert-mode", "self-signed", "where the webhook certificate comes from: self-signed (kept in --webhook-cert-secret, CA injected) or cert-manager (files in --webhook-cert-dir, CA injected by cert-manager)")
	str(&o.WebhookCertSecret, "webhook-cert-secret", "karpenter-webhook-cert", "self-signed mode: [namespace/]name of the Secret holding the CA and certificate; the namespace defaults to the pod's (POD_NAMESPACE) or kube-system")
	str(&o.WebhookService, "webhook-service", "karpenter-webhook-service", "self-signed mode: [namespace/]name of the webhook Service the certificate is for")
	str(&o.WebhookCertIPs, "webhook-cert-ips", "", "self-signed mode: comma-separated IPs the certificate also covers, e.g. 127.0.0.1 for a local manager")
	str(&o.WebhookConfiguration, "webhook-configuration", "karpenter-validating-webhook-configuration", "self-signed mode: the ValidatingWebhookConfiguration to inject the CA into")
	str(&o.MutatingWebhookConfiguration, "mutating-webhook-configuration", "karpenter-mutating-webhook-configuration", "self-signed mode: the MutatingWebhookConfiguration (the CapacityBudget gate) to inject the CA into; skipped while it does not exist")
	boolean(&o.EnableWebhooks, "enable-webhooks", true, "serve the conversion and validating webhooks")
	str(&o.CloudProvider, "cloud-provider", "kwok", "cloud provider: kwok or aws")
	duration(&o.BatchIdleDuration, "batch-idle-duration", time.Second, "how long the provisioner waits for more pending pods before it solves")
	duration(&o.BatchMaxDuration, "batch-max-duration", 10*time.Second, "the longest a provisioning batch stays open")
	duration(&o.DisplacedPodGrace, "displaced-pod-grace", 5*time.Second, "how long after its nominated node became Ready a pod that kube-scheduler left without room there waits before capacity is launched for it (kube-scheduler places pending pods where room is free meanwhile); about its pod retry backoff")
	duration(&o.PolicyEvaluationTimeout, "policy-evaluation-timeout", 100*time.Millisecond, "how long one evaluation of a CapacityPolicy may run; one that runs out is an evaluation error, handled by the policy's failurePolicy")
	duration(&o.MaxExceptionDuration, "max-exception-duration", 720*time.Hour, "how far out a CapacityException's expiresAt may be when it is written; admission refuses one further out")
	duration(&o.AuditInterval, "audit-interval", time.Minute, "how often the audit of what runs writes its reports at least (it also runs on change)")
	str(&o.ShowbackTeamLabel, "showback-team-label", "team", "the namespace label whose value karpenter_policy_team_cost_per_hour sums namespaces' costs by; empty reports no team")
	integer(&o.ShowbackMaxNamespaces, "showback-max-namespaces", 1000, "the most namespaces karpenter_policy_namespace_cost_per_hour reports, the costliest; the others are summed under namespace=\"(other)\"")
	str(&o.LogLevel, "log-level", "info", "log level: debug, info or error")
	boolean(&o.Disruption, "disruption", true, "run the disruption controller: remove empty nodes, replace drifted and expired ones, consolidate underutilized ones, within the NodePools' budgets")
	str(&o.FeatureGates, "feature-gates", "", "feature gates as upstream names them, Name=true,...; upstream's default string is "+UpstreamFeatureGates()+" (StaticCapacity defaults to true here)")
	float(&o.ConsolidationMinSavings, "consolidation-min-savings", 0, "the least fraction (0 to 1) of a node's price a consolidation replacement must save; 0 takes any saving")
	str(&o.ClusterName, "cluster-name", "", "aws: the cluster's name, for tags and resource names (required with --cloud-provider=aws)")
	str(&o.ClusterEndpoint, "cluster-endpoint", "", "aws: the API server URL nodes join")
	str(&o.AWSRegion, "aws-region", "", "aws: the region; empty takes the SDK's (AWS_REGION, the profile, instance metadata)")
	str(&o.InterruptionQueue, "interruption-queue", "", "aws: the SQS queue EventBridge sends interruption events to; empty: no interruption handling from AWS")
	boolean(&o.IsolatedVPC, "isolated-vpc", false, "aws: no route to the Pricing API; on-demand prices come from the built-in table")
	duration(&o.InstanceTypesTTL, "instance-types-ttl", 12*time.Hour, "aws: how long EC2's instance types and offerings are cached")
	str(&o.ClusterCABundle, "cluster-ca-bundle", "", "aws: the API server's CA (PEM, base64) nodes trust; empty takes the manager's own")
	integer(&o.ReservedENIs, "reserved-enis", 0, "aws: ENIs per instance kept from the VPC CNI's pods when maxPods is computed")
	float(&o.VMMemoryOverheadPercent, "vm-memory-overhead-percent", 0.075, "aws: the fraction of a type's memory taken as the hypervisor's")

	// Upstream's names (docs/upstream.md, "Settings").
	integer(&o.MetricsPort, "metrics-port", 8080, "port the metrics endpoint binds to, on all interfaces, when --metrics-bind-address is not given")
	integer(&o.HealthProbePort, "health-probe-port", 8081, "port the health probes bind to, on all interfaces, when --health-probe-bind-address is not given")
	str(&o.LeaderElectionName, "leader-election-name", "karpenter-leader-election", "name of the leader election Lease (upstream's name for --leader-election-id, which wins when given)")
	boolean(&o.DisableLeaderElection, "disable-leader-election", false, "run without leader election (upstream's inverse of --leader-elect)")
	str(&o.KarpenterService, "karpenter-service", "", "the Service in front of the webhooks (upstream's name for --webhook-service, which wins when given)")
	integer64(&o.MemoryLimit, "memory-limit", -1, "the container's memory limit in bytes; Go's soft memory limit is set to 90% of it; -1 leaves it alone")
	integer64(&o.CPURequests, "cpu-requests", 1000, "the container's CPU request in millicores; 0 or less means 1000")
	str(&o.LogOutputPaths, "log-output-paths", "stdout", "comma-separated paths logs are written to: stdout, stderr or files")
	str(&o.LogErrorOutputPaths, "log-error-output-paths", "stderr", "comma-separated paths the logger's own errors are written to")
	str(&o.PreferencePolicy, "preference-policy", PreferencePolicyRespect, "Respect or Ignore: Ignore drops preferred node and pod (anti-)affinities and ScheduleAnyway topology spreads when planning capacity")
	str(&o.MinValuesPolicy, "min-values-policy", MinValuesPolicyStrict, "Strict or BestEffort: BestEffort relaxes a requirement's minValues that cannot be met and marks the NodeClaim karpenter.sh/nodeclaim-min-values-relaxed")
	boolean(&o.EnableProfiling, "enable-profiling", false, "serve Go's pprof handlers (/debug/pprof/) on the metrics endpoint")
	boolean(&o.DisableControllerWarmup, "disable-controller-warmup", true, "upstream's controller warmup; only true (no warmup) is built")
	boolean(&o.DisableClusterStateObservability, "disable-cluster-state-observability", false, "upstream's switch for cluster state metrics and events; only false is built")
	boolean(&o.IgnoreDRARequests, "ignore-dra-requests", true, "ignore pods' DRA resource claims when planning; only true is built")
	boolean(&o.LegacyNodeRepair, "legacy-node-repair", false, "upstream's legacy node repair controller; not built (node repair is a disruption method here)")
	str(&o.SchedulerConfig, "scheduler-config", "", "upstream's kube-scheduler configuration to mirror; not built yet, must be empty")
	return errs
}

// Validate checks values that each flag accepts alone but that do not make sense.
func (o *Options) Validate() error {
	var errs []error
	if o.KubeClientQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-client-qps must be positive, got %v", o.KubeClientQPS))
	}
	if o.KubeClientBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-client-burst must be positive, got %d", o.KubeClientBurst))
	}
	if o.WebhookPort <= 0 || o.WebhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port must be in 1..65535, got %d", o.WebhookPort))
	}
	switch o.CloudProvider {
	case "kwok":
	case "aws":
		if o.ClusterName == "" {
			errs = append(errs, fmt.Errorf("--cluster-name (CLUSTER_NAME) is required with --cloud-provider=aws"))
		}
		if o.InstanceTypesTTL <= 0 {
			errs = append(errs, fmt.Errorf("--instance-types-ttl must be positive, got %s", o.InstanceTypesTTL))
		}
	default:
		errs = append(errs, fmt.Errorf("--cloud-provider must be kwok or aws, got %q", o.CloudProvider))
	}
	if o.BatchIdleDuration <= 0 || o.BatchMaxDuration <= 0 {
		errs = append(errs, fmt.Errorf("--batch-idle-duration and --batch-max-duration must be positive"))
	} else if o.BatchIdleDuration > o.BatchMaxDuration {
		errs = append(errs, fmt.Errorf("--batch-idle-duration (%s) must not exceed --batch-max-duration (%s)", o.BatchIdleDuration, o.BatchMaxDuration))
	}
	if o.ConsolidationMinSavings < 0 || o.ConsolidationMinSavings >= 1 {
		errs = append(errs, fmt.Errorf("--consolidation-min-savings must be in [0, 1), got %v", o.ConsolidationMinSavings))
	}
	if o.ShowbackMaxNamespaces < 1 {
		errs = append(errs, fmt.Errorf("--showback-max-namespaces must be at least 1, got %d", o.ShowbackMaxNamespaces))
	}
	if o.AuditInterval < 10*time.Second {
		errs = append(errs, fmt.Errorf("--audit-interval must be at least 10s, got %s", o.AuditInterval))
	}
	if o.MaxExceptionDuration <= 0 {
		errs = append(errs, fmt.Errorf("--max-exception-duration must be greater than zero, got %s", o.MaxExceptionDuration))
	}
	if o.PolicyEvaluationTimeout <= 0 || o.PolicyEvaluationTimeout > 5*time.Second {
		errs = append(errs, fmt.Errorf("--policy-evaluation-timeout must be in (0, 5s] (it runs on the provisioning path and in the admission webhook), got %s", o.PolicyEvaluationTimeout))
	}
	if o.DisplacedPodGrace < 0 {
		errs = append(errs, fmt.Errorf("--displaced-pod-grace must not be negative, got %s", o.DisplacedPodGrace))
	}
	switch o.WebhookCertMode {
	case "self-signed", "cert-manager":
	default:
		errs = append(errs, fmt.Errorf("--webhook-cert-mode must be self-signed or cert-manager, got %q", o.WebhookCertMode))
	}
	for _, ip := range strings.Split(o.WebhookCertIPs, ",") {
		if ip = strings.TrimSpace(ip); ip != "" && net.ParseIP(ip) == nil {
			errs = append(errs, fmt.Errorf("--webhook-cert-ips: %q is not an IP address", ip))
		}
	}
	switch o.LogLevel {
	case "debug", "info", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level (LOG_LEVEL) must be debug, info or error, got %q", o.LogLevel))
	}
	if o.PreferencePolicy != PreferencePolicyRespect && o.PreferencePolicy != PreferencePolicyIgnore {
		errs = append(errs, fmt.Errorf("--preference-policy (PREFERENCE_POLICY) must be Respect or Ignore, got %q", o.PreferencePolicy))
	}
	if o.MinValuesPolicy != MinValuesPolicyStrict && o.MinValuesPolicy != MinValuesPolicyBestEffort {
		errs = append(errs, fmt.Errorf("--min-values-policy (MIN_VALUES_POLICY) must be Strict or BestEffort, got %q", o.MinValuesPolicy))
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"metrics-port", o.MetricsPort}, {"health-probe-port", o.HealthProbePort}} {
		if p.v < 0 || p.v > 65535 {
			errs = append(errs, fmt.Errorf("--%s (%s) must be in 0..65535, got %d", p.name, envName(p.name), p.v))
		}
	}
	if o.ClusterCABundle != "" {
		if _, err := base64.StdEncoding.DecodeString(o.ClusterCABundle); err != nil {
			errs = append(errs, fmt.Errorf("--cluster-ca-bundle (CLUSTER_CA_BUNDLE) must be base64 (of the CA's PEM): %w", err))
		}
	}
	if o.ReservedENIs < 0 {
		errs = append(errs, fmt.Errorf("--reserved-enis (RESERVED_ENIS) must not be negative, got %d", o.ReservedENIs))
	}
	if o.VMMemoryOverheadPercent < 0 || o.VMMemoryOverheadPercent >= 1 {
		errs = append(errs, fmt.Errorf("--vm-memory-overhead-percent (VM_MEMORY_OVERHEAD_PERCENT) must be in [0, 1), got %v", o.VMMemoryOverheadPercent))
	}
	if o.MemoryLimit == 0 || o.MemoryLimit < -1 {
		errs = append(errs, fmt.Errorf("--memory-limit (MEMORY_LIMIT) must be a positive number of bytes or -1, got %d", o.MemoryLimit))
	}
	// Upstream's switches for what is not built here: each default is accepted, the other
	// value refused with what is missing (docs/upstream.md).
	for _, nb := range []struct {
		name     string
		refused  bool
		building string
	}{
		{"legacy-node-repair", o.LegacyNodeRepair, "the legacy node repair controller is not built; node repair is a disruption method here (FEATURE_GATES NodeRepair=true)"},
		{"scheduler-config", o.SchedulerConfig != "", "mirroring kube-scheduler's configuration (podTopologySpread.defaultConstraints) is not built yet"},
		{"disable-controller-warmup", !o.DisableControllerWarmup, "controller warmup before leader election is not built yet"},
		{"disable-cluster-state-observability", o.DisableClusterStateObservability, "turning off cluster state metrics and events is not built yet"},
		{"ignore-dra-requests", !o.IgnoreDRARequests, "planning for DRA resource claims is not built yet; they are always ignored"},
	} {
		if nb.refused {
			errs = append(errs, fmt.Errorf("--%s (%s): %s", nb.name, envName(nb.name), nb.building))
		}
	}
	return errors.Join(errs...)
}

// Parse registers the flags on fs, parses args, and validates the result.
func Parse(fs *flag.FlagSet, args []string) (*Options, error) {
	o := &Options{}
	envErrs := o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := envErrs.Err(); err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) { o.explicit[f.Name] = true })
	if err := o.resolve(); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// resolve turns upstream's names into this manager's settings where this manager's own
// were not given, and parses the feature gates.
func (o *Options) resolve() error {
	if !o.explicit["metrics-bind-address"] && o.explicit["metrics-port"] {
		o.MetricsBindAddress = fmt.Sprintf(":%d", o.MetricsPort)
	}
	if !o.explicit["health-probe-bind-address"] && o.explicit["health-probe-port"] {
		o.HealthProbeBindAddress = fmt.Sprintf(":%d", o.HealthProbePort)
	}
	if !o.explicit["leader-election-id"] {
		o.LeaderElectionID = o.LeaderElectionName
	}
	if o.DisableLeaderElection {
		o.LeaderElect = false
	}
	if !o.explicit["webhook-service"] && o.KarpenterService != "" {
		o.WebhookService = o.KarpenterService
	}
	if o.CPURequests <= 0 {
		o.CPURequests = 1000
	}
	gates, err := ParseFeatureGates(o.FeatureGates)
	if err != nil {
		return fmt.Errorf("--feature-gates (FEATURE_GATES): %w", err)
	}
	o.Gates = gates
	return nil
}

// Explicit says whether a setting was given, by flag or environment.
func (o *Options) Explicit(flagName string) bool { return o.explicit[flagName] }

// EnvErrors collects environment variables whose values do not parse.
type EnvErrors struct{ errs []error }

func (e *EnvErrors) add(flagName, value string, err error) {
	e.errs = append(e.errs, fmt.Errorf("environment variable %s=%q (for --%s): %w", envName(flagName), value, flagName, err))
}

// Err joins the collected errors, or is nil.
func (e *EnvErrors) Err() error { return errors.Join(e.errs...) }

// Namespace is the namespace the manager runs in: POD_NAMESPACE, or kube-system.
func Namespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "kube-system"
}

// NamespacedName splits "namespace/name", defaulting the namespace to Namespace().
func NamespacedName(s string) (namespace, name string) {
	if ns, n, ok := strings.Cut(s, "/"); ok {
		return ns, n
	}
	return Namespace(), s
}

// IPs parses --webhook-cert-ips.
func (o *Options) IPs() []net.IP {
	var out []net.IP
	for _, ip := range strings.Split(o.WebhookCertIPs, ",") {
		if parsed := net.ParseIP(strings.TrimSpace(ip)); parsed != nil {
			out = append(out, parsed)
		}
	}
	return out
}
