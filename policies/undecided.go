package policies

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// Inputs of the admission decision point that only a cluster knows. karpenterctl evaluates
// admission without a cluster and names the ones its inputs do not give in
// AdmissionInput.Unknown; a rule that reads one cannot be decided offline (docs/cli.md).
const (
	// UnknownNamespaceLabels: the labels of the object's namespace (--namespaces gives them).
	UnknownNamespaceLabels = "input.namespace.labels"
	// UnknownUsage: the namespace's run-rate and Spot share (--nodes gives them).
	UnknownUsage = "input.usage"
	// UnknownOperation and UnknownOldObject: whether the object exists in the cluster, and
	// as what (plan's --base gives them; validate cannot know).
	UnknownOperation = "input.operation"
	UnknownOldObject = "input.oldObject"
)

// Undecided is a policy whose results at a decision point depend on inputs not known: its
// results of that kind are left out, never taken as a pass.
type Undecided struct {
	Source Source
	// Rules are the results undecided: "deny", "warn", or "namespaceSelector" when whether the
	// policy applies at all depends on the namespace's labels.
	Rules string
	// Reads are the unknown inputs the rules read, e.g. input.usage.
	Reads []string
}

func (u Undecided) String() string { return fmt.Sprintf("%s: %s", u.Source, u.Says()) }

// Says what cannot be decided, without the source.
func (u Undecided) Says() string {
	if u.Rules == "namespaceSelector" {
		return fmt.Sprintf("whether its namespaceSelector selects the namespace cannot be decided without %s", strings.Join(u.Reads, ", "))
	}
	return fmt.Sprintf("its %s rules cannot be decided without %s", u.Rules, strings.Join(u.Reads, ", "))
}

// partialKey is what partial evaluation makes of one of a unit's result sets (deny or warn)
// when some inputs are unknown.
type partialKey struct {
	// reads are the unknown inputs the undecided rules read; none when the set is decided.
	reads []string
	// decided are the entries rules produce whatever the unknown inputs hold.
	decided []any
}

// undecidedRules partially evaluates a unit's deny and warn rules at a decision point with
// the unknown inputs left unknown. A rule whose residue reads none of them is decided (its
// entry stands); one whose residue reads one cannot be decided offline. It returns, for each
// of "deny" and "warn" with an undecided rule, the entries decided and the unknown inputs
// read. A partial evaluation that fails, or whose residue it cannot read rule by rule, counts
// as reading them all with nothing decided, so that nothing undecided passes.
func (e *Engine) undecidedRules(ctx context.Context, u *unit, point string, doc map[string]any, unknown []string) map[string]partialKey {
	if _, joins := u.queries[point]; !joins || len(unknown) == 0 {
		return nil
	}
	refs := make([]ast.Ref, 0, len(unknown))
	for _, p := range unknown {
		if r, perr := ast.ParseRef(p); perr == nil {
			refs = append(refs, r)
		}
	}
	if !u.mayRead(refs) {
		// No module of the unit refers to an unknown input: every rule is decided.
		return nil
	}
	input, err := toValue(withoutPaths(doc, unknown))
	out := map[string]partialKey{}
	for _, key := range []string{"deny", "warn"} {
		if err != nil {
			out[key] = partialKey{reads: unknown}
			continue
		}
		var pq *rego.PartialQueries
		prepared, perr := u.preparedPartial(ctx, point, key, unknown)
		if perr == nil {
			pq, perr = prepared.Partial(ctx, rego.EvalParsedInput(input))
		}
		if perr != nil {
			out[key] = partialKey{reads: unknown}
			continue
		}
		if reads := residueReads(pq.Queries, pq.Support, refs); len(reads) > 0 {
			out[key] = splitResidue(pq, "partial."+point, key, refs, unknown)
		}
	}
	return out
}

// preparedPartial is the unit's partial query of a result set with these inputs unknown,
// prepared once.
func (u *unit) preparedPartial(ctx context.Context, point, key string, unknown []string) (*rego.PreparedPartialQuery, error) {
	k := point + "." + key + "|" + strings.Join(unknown, ",")
	if q, ok := u.partial.Load(k); ok {
		return q.(*rego.PreparedPartialQuery), nil
	}
	q, err := rego.New(rego.Query("data."+point+"."+key), rego.Compiler(u.compiler), rego.Store(u.store),
		rego.Unknowns(unknown), rego.StrictBuiltinErrors(true)).PrepareForPartial(ctx)
	if err != nil {
		return nil, err
	}
	u.partial.Store(k, &q)
	return &q, nil
}

// mayRead reports whether a module of the unit (its tests aside) refers to one of the inputs,
// a part of one or a whole that holds one.
func (u *unit) mayRead(unknown []ast.Ref) bool {
	u.inputOnce.Do(func() {
		seen := map[string]bool{}
		for name, m := range u.compiler.Modules {
			if IsTestModule(name) {
				continue
			}
			ast.WalkRefs(m, func(r ast.Ref) bool {
				if r.HasPrefix(ast.InputRootRef) && !seen[r.String()] {
					seen[r.String()] = true
					u.inputRefs = append(u.inputRefs, r)
				}
				return false
			})
			// A module may take input whole (x := input): a term, not a ref.
			ast.WalkTerms(m, func(t *ast.Term) bool {
				if v, ok := t.Value.(ast.Var); ok && v.Equal(ast.InputRootDocument.Value) && !seen["input"] {
					seen["input"] = true
					u.inputRefs = append(u.inputRefs, ast.InputRootRef)
				}
				return false
			})
		}
	})
	for _, r := range u.inputRefs {
		for _, x := range unknown {
			if r.HasPrefix(x) || x.HasPrefix(r.ConstantPrefix()) {
				return true
			}
		}
	}
	return false
}

// splitResidue reads a partial evaluation whose query is the support rule set
// data.partial.<point>.<key>: each support rule of that set whose body reads no unknown input
// and whose entry is ground is a decided entry; the others are undecided.
func splitResidue(pq *rego.PartialQueries, pkg, key string, refs []ast.Ref, unknown []string) partialKey {
	all := partialKey{reads: unknown}
	want := ast.MustParseRef("data." + pkg + "." + key)
	if len(pq.Queries) != 1 || len(pq.Queries[0]) != 1 {
		return all
	}
	if t, ok := pq.Queries[0][0].Terms.(*ast.Term); !ok || !t.Equal(ast.NewTerm(want)) {
		return all
	}
	var out partialKey
	seen := map[string]bool{}
	for _, m := range pq.Support {
		if m.Package.Path.String() != "data."+pkg {
			continue
		}
		for _, r := range m.Rules {
			if r.Head.Name.String() != key {
				continue
			}
			reads := residueReads([]ast.Body{r.Body}, nil, refs)
			if len(reads) == 0 && r.Head.Key != nil && r.Head.Key.IsGround() {
				v, err := ast.JSON(r.Head.Key.Value)
				if err == nil {
					out.decided = append(out.decided, v)
					continue
				}
			}
			if len(reads) == 0 {
				reads = unknown
			}
			for _, x := range reads {
				if !seen[x] {
					seen[x] = true
					out.reads = append(out.reads, x)
				}
			}
		}
	}
	sort.Strings(out.reads)
	return out
}

// residueReads are the unknown inputs partial-evaluation queries and support modules refer to
// (an unknown input, a part of one, or a whole that holds one).
func residueReads(queries []ast.Body, support []*ast.Module, unknown []ast.Ref) []string {
	seen := map[string]bool{}
	visit := func(r ast.Ref) bool {
		for _, u := range unknown {
			if r.HasPrefix(u) || u.HasPrefix(r.ConstantPrefix()) {
				seen[u.String()] = true
			}
		}
		return false
	}
	for _, q := range queries {
		ast.WalkRefs(q, visit)
	}
	for _, m := range support {
		ast.WalkRefs(m, visit)
	}
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// withoutPaths is a copy of an input document without the given input.* paths.
func withoutPaths(doc map[string]any, paths []string) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		out[k] = v
	}
	for _, p := range paths {
		parts := strings.Split(strings.TrimPrefix(p, "input."), ".")
		m := out
		for i, part := range parts {
			if i == len(parts)-1 {
				delete(m, part)
				break
			}
			child, ok := m[part].(map[string]any)
			if !ok {
				break
			}
			cp := make(map[string]any, len(child))
			for k, v := range child {
				cp[k] = v
			}
			m[part] = cp
			m = cp
		}
	}
	return out
}

// evalAdmissionUnit evaluates one unit at the admission decision point into d. With unknown
// inputs, a result set (deny, warn) with rules that read one keeps only its decided entries,
// and the rest is recorded as undecided.
func (e *Engine) evalAdmissionUnit(ctx context.Context, d *Decision, u *unit, at policyv1.EnforcementPoint, doc map[string]any, unknown []string,
	enforcement func(string) (Source, policyv1.EnforcementAction), exempt exemptFunc) {
	const point = policyv1.DecisionPointAdmission
	partial := e.undecidedRules(ctx, u, point, doc, unknown)
	input, err := toValue(doc)
	var r result
	if err == nil {
		r, err = e.eval(ctx, u, point, at, input, exempt)
	}
	if err == nil && len(partial) > 0 {
		src, _ := enforcement("")
		decided := result{}
		for k, v := range r {
			decided[k] = v
		}
		for _, key := range []string{"deny", "warn"} {
			p, ok := partial[key]
			if !ok {
				continue
			}
			decided[key] = p.decided
			if len(p.reads) > 0 {
				d.Undecided = append(d.Undecided, Undecided{Source: src, Rules: key, Reads: p.reads})
			}
		}
		r = decided
	}
	d.collect(u, point, r, err, enforcement, exempt)
}
