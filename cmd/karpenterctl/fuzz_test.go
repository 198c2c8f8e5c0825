package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What a pull request can put in front of karpenterctl is arbitrary YAML: whatever it is,
// validate, convert, simulate and plan answer within a bound, with exit 0, 1 (invalid) or 2
// (unreadable), and a message whenever they refuse; they never panic. `make test` runs the
// target for a few seconds, `make fuzz` longer; testdata/fuzz/FuzzCLI holds the seed corpus,
// and the repository's manifests seed it further.

// cliAnswerWithin bounds one run on one input.
const cliAnswerWithin = 30 * time.Second

// commands are the subcommands fuzzed, {} standing for the fuzzed file.
var commands = [][]string{
	{"validate", "-f", "{}"},
	{"convert", "-f", "{}", "--to", "v1beta1"},
	{"simulate", "--nodepools", "{}", "--workload", "{}"},
	{"plan", "--base", "../../config/samples", "--head", "{}", "--workload", "{}"},
}

func FuzzCLI(f *testing.F) {
	for _, glob := range []string{"../../config/samples/*.yaml", "../../test/testdata/invalid/*.yaml", "../../test/workloads/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for i, file := range files {
			raw, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), raw)
		}
	}
	f.Add(uint8(0), []byte(yamlBomb))
	f.Add(uint8(1), []byte("a: "+strings.Repeat("[", 20000)))
	f.Add(uint8(2), []byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nspec: {template: {spec: {requirements: [{key: 1}]}}}\n"))
	f.Fuzz(func(t *testing.T, which uint8, doc []byte) {
		file := filepath.Join(t.TempDir(), "in.yaml")
		if err := os.WriteFile(file, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		args := append([]string(nil), commands[int(which)%len(commands)]...)
		for i, a := range args {
			if a == "{}" {
				args[i] = file
			}
		}
		var out, errOut bytes.Buffer
		code := -1
		done := make(chan struct{})
		go func() {
			defer close(done)
			code = run(args, strings.NewReader(""), &out, &errOut)
		}()
		select {
		case <-done:
		case <-time.After(cliAnswerWithin):
			t.Fatalf("%v: no answer within %s", args[0], cliAnswerWithin)
		}
		switch code {
		case exitOK:
		case exitInvalid, exitUsage:
			if strings.TrimSpace(out.String()+errOut.String()) == "" {
				t.Fatalf("%v: exit %d without a word", args[0], code)
			}
		default:
			t.Fatalf("%v: exit %d\n%s%s", args[0], code, out.String(), errOut.String())
		}
	})
}

// A billion laughs: nine levels of nine aliases.
const yamlBomb = `a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

// YAML bombs, nesting past the parser's limit, documents past the API server's size and files
// past the CLI's are refused, each with a message that says which, and quickly.
func TestHostileYAMLIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		want string
	}{
		"aliases":       {yamlBomb, "excessive aliasing"},
		"deep nesting":  {"a: " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "exceeded max depth"},
		"huge scalar":   {"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: " + strings.Repeat("x", 4<<20) + "\n", "larger than the 3 MiB the API server accepts"},
		"huge document": {strings.Repeat("a: b\n---\n", 8<<20), "larger than the 64 MiB a manifest file may be"},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := karpenterctl(t, tc.doc, "validate", "-f", "-")
			if code != exitUsage || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("exit %d, want 2 and %q:\n%.300s%.300s", code, tc.want, out, errOut)
			}
		})
	}
}
