package policies

import (
	"strings"
	"testing"
)

// Every builtin that reaches outside or is not deterministic is refused at compile time, with
// the module, line and builtin named; deterministic ones compile. Tests and policies alike:
// the test modules are compiled against the same set.
func TestCapabilitySet(t *testing.T) {
	for _, tc := range []struct {
		call    string
		builtin string // "" when it must compile
	}{
		{`http.send({"method": "get", "url": "http://127.0.0.1:1/"})`, "http.send"},
		{`time.now_ns()`, "time.now_ns"},
		{`rand.intn("x", 10)`, "rand.intn"},
		{`uuid.rfc4122("x")`, "uuid.rfc4122"},
		{`opa.runtime()`, "opa.runtime"},
		{`net.cidr_contains("10.0.0.0/8", "10.1.1.1")`, "net.cidr_contains"},
		{`net.lookup_ip_addr("example.com")`, "net.lookup_ip_addr"},
		{`rego.parse_module("x.rego", "package x")`, "rego.parse_module"},
		{`trace("x")`, "trace"},
		{`json.match_schema({}, {})`, "json.match_schema"},
		{`providers.aws.sign_req({}, {}, 0)`, "providers.aws.sign_req"},
		{`sprintf("%d", [1])`, ""},
		{`regex.match("a+", "aa")`, ""},
		{`time.parse_rfc3339_ns(input.now)`, ""},
		{`units.parse_bytes("1Gi")`, ""},
	} {
		t.Run(tc.call, func(t *testing.T) {
			rego := "package karpenter.launch\n\n# a comment\ndeny contains msg if {\n\tx := " + tc.call + "\n\tmsg := sprintf(\"%v\", [x])\n}\n"
			_, problems := Compile([]Module{{Name: "gate.rego", Rego: rego}})
			if tc.builtin == "" {
				if len(problems) > 0 {
					t.Fatalf("a deterministic builtin is refused: %v", problems)
				}
				return
			}
			if len(problems) != 1 {
				t.Fatalf("want one problem, got %v", problems)
			}
			p := problems[0]
			if p.Module != "gate.rego" || p.Line != 5 || !strings.Contains(p.Message, "builtin "+tc.builtin+" is not allowed") {
				t.Errorf("want gate.rego:5 naming %s, got %s", tc.builtin, p.Error())
			}
		})
	}
	// print is erased from policies (it would write to the controller's log); a test module
	// is held to the same set.
	_, problems := Compile([]Module{{Name: "gate.rego", Rego: "package karpenter.launch\n\ndeny contains 1 if false\n"},
		{Name: "gate_test.rego", Rego: "package karpenter.launch_test\n\ntest_x if {\n\thttp.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:1/\"})\n}\n"}})
	if len(problems) != 1 || problems[0].Module != "gate_test.rego" || problems[0].Line != 4 {
		t.Errorf("a test module calling http.send: %v", problems)
	}
}

// The capability set leaves out every builtin OPA marks non-deterministic.
func TestDeniedBuiltinsCoverNondeterminism(t *testing.T) {
	denied := DeniedBuiltins()
	for _, name := range []string{"http.send", "time.now_ns", "rand.intn", "uuid.rfc4122", "opa.runtime", "io.jwt.decode_verify", "net.lookup_ip_addr"} {
		found := false
		for _, d := range denied {
			found = found || d == name
		}
		if !found {
			t.Errorf("%s is not denied", name)
		}
	}
}
