package policies

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Policy Rego runs inside the controller, the admission webhook and karpenterctl, on what a
// pull request wrote: it is compiled against a capability set that can only compute on its
// input, its parameters and its own rules (docs/policies.md, "Capability set"). Left out are
// the builtins OPA marks non-deterministic (http.send, time.now_ns, rand.intn, uuid.rfc4122,
// opa.runtime, net.lookup_ip_addr, JWT signing and verification against keys fetched or
// clocks read, JSON schema with remote references) and those that reach outside or
// inspect the engine: every net.* and providers.*, rego.parse_module, trace and print, and
// x509 verification (it reads the clock). Time comes from input.now. A network allow-list is
// set too, empty, should a future builtin reach out.
var deniedPrefixes = []string{"net.", "providers."}

var deniedBuiltins = []string{
	"rego.parse_module", "trace", "print", "internal.print",
	"crypto.x509.parse_and_verify_certificates", "crypto.x509.parse_and_verify_certificates_with_options",
}

// Allowed reports whether a builtin is in the policy engine's capability set.
func Allowed(b *ast.Builtin) bool {
	if b.Nondeterministic || slices.Contains(deniedBuiltins, b.Name) {
		return false
	}
	for _, p := range deniedPrefixes {
		if strings.HasPrefix(b.Name, p) {
			return false
		}
	}
	return true
}

var capabilities = sync.OnceValue(func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool { return !Allowed(b) })
	c.AllowNet = []string{}
	return c
})

// Capabilities is the capability set policy Rego is compiled against.
func Capabilities() *ast.Capabilities { return capabilities() }

// DeniedBuiltins are the builtins of this OPA version that policy Rego may not call, sorted.
func DeniedBuiltins() []string {
	var out []string
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		if !Allowed(b) {
			out = append(out, b.Name)
		}
	}
	slices.Sort(out)
	return out
}

var undefinedFunction = regexp.MustCompile(`undefined function (\S+)`)

// explainDenied rewrites the compiler's "undefined function" for a builtin OPA has but the
// capability set leaves out, so the author learns why rather than suspecting a typo.
func explainDenied(msg string) string {
	m := undefinedFunction.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	name := m[1]
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		if b.Name == name && !Allowed(b) {
			return fmt.Sprintf("builtin %s is not allowed in policy Rego: policies may not reach the network or the runtime, "+
				"parse modules, trace, or read the clock or randomness (time is input.now); see docs/policies.md, \"Capability set\"", name)
		}
	}
	return msg
}
