package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/karpenter-policy/karpenter/cmd/karpenter/options"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// setUpLogging sets the manager's logger as upstream's settings ask: LOG_LEVEL, logs to
// LOG_OUTPUT_PATHS and the logger's own errors to LOG_ERROR_OUTPUT_PATHS (stdout, stderr or
// files, comma-separated). A path that cannot be opened is an error naming it.
func setUpLogging(opts *options.Options) error {
	level := map[string]zapcore.Level{"debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "error": zapcore.ErrorLevel}[opts.LogLevel]
	out, _, err := uberzap.Open(paths(opts.LogOutputPaths)...)
	if err != nil {
		return fmt.Errorf("--log-output-paths (LOG_OUTPUT_PATHS) %q: %w", opts.LogOutputPaths, err)
	}
	errOut, _, err := uberzap.Open(paths(opts.LogErrorOutputPaths)...)
	if err != nil {
		return fmt.Errorf("--log-error-output-paths (LOG_ERROR_OUTPUT_PATHS) %q: %w", opts.LogErrorOutputPaths, err)
	}
	ctrl.SetLogger(zap.New(zap.Level(level), zap.WriteTo(out), zap.RawZapOpts(uberzap.ErrorOutput(errOut))))
	return nil
}

func paths(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// scheduling are the solver's policies from PREFERENCE_POLICY and MIN_VALUES_POLICY.
func scheduling(opts *options.Options) solver.Policies {
	return solver.Policies{IgnorePreferences: opts.PreferencePolicy == options.PreferencePolicyIgnore,
		MinValuesBestEffort: opts.MinValuesPolicy == options.MinValuesPolicyBestEffort}
}

// applyMemoryLimit sets Go's soft memory limit to 90% of MEMORY_LIMIT, as upstream does, so
// the garbage collector works harder before the container is killed for memory.
func applyMemoryLimit(opts *options.Options) {
	if opts.MemoryLimit > 0 {
		debug.SetMemoryLimit(int64(float64(opts.MemoryLimit) * 0.9))
	}
}
