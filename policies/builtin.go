package policies

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

// The built-in policies implement CapacityBudget: rego/budget.rego is the library (limits in
// force, the monthly rate, Spot bounds, instance-family globs) and one module per decision
// point applies it. Each has a _test.rego beside it.
//
//go:embed rego/*.rego
var builtinFS embed.FS

// BudgetLibrary is the package of the built-in CapacityBudget library.
const BudgetLibrary = "karpenter.budget"

// BuiltinModules returns the built-in Rego modules, sorted by name; with tests, the
// _test.rego modules too.
func BuiltinModules(tests bool) []Module {
	entries, err := fs.ReadDir(builtinFS, "rego")
	if err != nil {
		panic(fmt.Sprintf("reading embedded policies: %v", err))
	}
	var out []Module
	for _, e := range entries {
		if !tests && IsTestModule(e.Name()) {
			continue
		}
		b, err := builtinFS.ReadFile(path.Join("rego", e.Name()))
		if err != nil {
			panic(fmt.Sprintf("reading embedded policy %s: %v", e.Name(), err))
		}
		out = append(out, Module{Name: e.Name(), Rego: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CompileBuiltin compiles the built-in policies; an error means the binary was built from
// Rego that does not compile, which the package's tests catch.
func CompileBuiltin(tests bool) (*Compiled, error) {
	c, problems := compile(BuiltinModules(tests), []string{BudgetLibrary})
	if len(problems) > 0 {
		return nil, fmt.Errorf("built-in policies: %v", problems)
	}
	return c, nil
}
