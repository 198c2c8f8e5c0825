package offline

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/webhooks/admission"
)

// Cluster is what offline admission knows of the cluster, from karpenterctl's inputs
// (admission.Facts): the namespaces of --namespaces and the Namespace manifests among the
// inputs, the usage attributed over --nodes, the catalog's instance types.
type Cluster struct {
	// Known are the namespaces by name; a namespace not here has unknown labels.
	Known map[string]policies.Namespace
	// AllNamespaces says Known holds all the cluster has (--namespaces was given).
	AllNamespaces bool
	// ByNamespace is the usage by namespace; nil when unknown (no --nodes), else a namespace
	// not here runs nothing.
	ByNamespace map[string]policies.Usage
	Types       []*cloudprovider.InstanceType
}

var _ admission.Facts = (*Cluster)(nil)

// Namespace implements admission.Facts.
func (c *Cluster) Namespace(_ context.Context, name string) (policies.Namespace, bool) {
	ns, ok := c.Known[name]
	if !ok {
		return policies.Namespace{Name: name}, false
	}
	return ns, true
}

// Namespaces implements admission.Facts.
func (c *Cluster) Namespaces(context.Context) ([]policies.Namespace, bool) {
	if !c.AllNamespaces {
		return nil, false
	}
	out := make([]policies.Namespace, 0, len(c.Known))
	for _, ns := range c.Known {
		out = append(out, ns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, true
}

// Usage implements admission.Facts.
func (c *Cluster) Usage(_ context.Context, namespace string) (policies.Usage, bool) {
	if c.ByNamespace == nil {
		return policies.Usage{}, false
	}
	return c.ByNamespace[namespace], true
}

// InstanceTypes implements admission.Facts.
func (c *Cluster) InstanceTypes(context.Context, *karpv1.NodePool) []*cloudprovider.InstanceType {
	return c.Types
}

// AddNamespaces adds Namespace manifests: their labels become known.
func (c *Cluster) AddNamespaces(docs []Document) error {
	if c.Known == nil {
		c.Known = map[string]policies.Namespace{}
	}
	for _, d := range docs {
		if d.Object == nil || d.GVK().Group != "" || d.GVK().Kind != "Namespace" {
			continue
		}
		ns := &corev1.Namespace{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, ns); err != nil {
			return fmt.Errorf("%s:%d: Namespace %s: %w", d.File, d.Line, d.Name(), err)
		}
		c.Known[ns.Name] = policies.Namespace{Name: ns.Name, Labels: ns.Labels}
	}
	return nil
}

// Admission is the validating webhook's policy review run offline, at the ci enforcement
// point (docs/cli.md, "Admission offline"): the same webhooks/admission code, with the policies
// that apply and what the inputs know of the cluster.
type Admission struct {
	engine *policies.Engine
	// cluster are the CapacityPolicies as the cluster has them (--policies), by name: a
	// CapacityPolicy under review is judged by the cluster's version of itself, if any.
	cluster map[string]*policyv1.CapacityPolicy
	facts   *Cluster
	now     time.Time
	gates   map[string]bool
	// existing are the objects as the cluster has them (plan's base), by key; nil when it is
	// not known whether an object exists (validate).
	existing map[string]runtime.Object
}

// PolicySource is a set of policy objects read from manifests.
type PolicySource struct {
	Policies   []PolicyDoc
	Exceptions []policyv1.CapacityException
}

// PolicyDoc is a CapacityPolicy with the document it came from.
type PolicyDoc struct {
	Policy *policyv1.CapacityPolicy
	Doc    Document
}

// LoadPolicies reads the CapacityPolicies and CapacityExceptions among documents; other kinds
// are left alone.
func LoadPolicies(docs []Document) (PolicySource, error) {
	var out PolicySource
	for _, d := range docs {
		if d.Object == nil || d.GVK().Group != policyv1.SchemeGroupVersion.Group {
			continue
		}
		switch d.GVK().Kind {
		case "CapacityPolicy":
			p := &policyv1.CapacityPolicy{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, p); err != nil {
				return out, fmt.Errorf("%s:%d: CapacityPolicy %s: %w", d.File, d.Line, d.Name(), err)
			}
			out.Policies = append(out.Policies, PolicyDoc{p, d})
		case "CapacityException":
			e := &policyv1.CapacityException{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, e); err != nil {
				return out, fmt.Errorf("%s:%d: CapacityException %s: %w", d.File, d.Line, d.Name(), err)
			}
			out.Exceptions = append(out.Exceptions, *e)
		}
	}
	return out, nil
}

// AdmissionSettings configure offline admission.
type AdmissionSettings struct {
	// Cluster are the policy objects the cluster has (--policies); Inputs those being
	// checked, which replace the cluster's of the same name.
	Cluster, Inputs PolicySource
	Facts           *Cluster
	Now             time.Time
	// Gates are the manager's feature gates, for the warnings of features that are off.
	Gates map[string]bool
	// Existing are the objects the cluster has (plan's base); nil: unknown (validate).
	Existing []runtime.Object
}

// NewAdmission builds offline admission. A CapacityPolicy of the cluster's (--policies) that
// does not compile is an error naming its file and line; one among the inputs is reported by
// validation and left out here, as the cluster would leave it out.
func NewAdmission(s AdmissionSettings) (*Admission, error) {
	engine, err := policies.NewEngine()
	if err != nil {
		return nil, err
	}
	a := &Admission{engine: engine, cluster: map[string]*policyv1.CapacityPolicy{}, facts: s.Facts, now: s.Now, gates: s.Gates}
	byName := map[string]*policyv1.CapacityPolicy{}
	where := map[string]Document{}
	for _, p := range s.Cluster.Policies {
		byName[p.Policy.Name], where[p.Policy.Name] = p.Policy, p.Doc
		a.cluster[p.Policy.Name] = p.Policy
	}
	if probs := policiesProblems(engine, byName, where); probs != nil {
		return nil, fmt.Errorf("--policies: CapacityPolicies that do not compile:\n  %s", strings.Join(probs, "\n  "))
	}
	for _, p := range s.Inputs.Policies {
		byName[p.Policy.Name] = p.Policy
	}
	list := make([]policyv1.CapacityPolicy, 0, len(byName))
	for _, p := range byName {
		list = append(list, *p)
	}
	engine.SetPolicies(list)
	exceptions := map[string]policyv1.CapacityException{}
	for _, src := range []PolicySource{s.Cluster, s.Inputs} {
		for _, e := range src.Exceptions {
			exceptions[e.Name] = e
		}
	}
	exList := make([]policyv1.CapacityException, 0, len(exceptions))
	for _, e := range exceptions {
		exList = append(exList, e)
	}
	for _, err := range engine.SetExceptions(exList) {
		return nil, err
	}
	if s.Existing != nil {
		a.existing = map[string]runtime.Object{}
		for _, o := range s.Existing {
			a.existing[objectKey(o)] = o
		}
	}
	return a, nil
}

func policiesProblems(engine *policies.Engine, byName map[string]*policyv1.CapacityPolicy, where map[string]Document) []string {
	list := make([]policyv1.CapacityPolicy, 0, len(byName))
	for _, p := range byName {
		list = append(list, *p)
	}
	var out []string
	for _, pp := range engine.SetPolicies(list) {
		d := where[pp.Policy]
		for _, pr := range pp.Problems {
			out = append(out, fmt.Sprintf("%s:%d: CapacityPolicy %s: %s", d.File, d.Line, pp.Policy, pr.Error()))
		}
	}
	sort.Strings(out)
	return out
}

// objectKey identifies an object by kind, namespace and name.
func objectKey(o runtime.Object) string {
	m, ok := o.(interface {
		GetNamespace() string
		GetName() string
	})
	if !ok {
		return ""
	}
	return fmt.Sprintf("%T/%s/%s", o, m.GetNamespace(), m.GetName())
}

// Review reviews one valid object (v1, v1beta1 already converted), as the webhook would at
// the ci enforcement point: an UPDATE of the cluster's object when the base has it, a CREATE
// when it does not, and an operation unknown when it is not known whether the cluster has it.
func (a *Admission) Review(ctx context.Context, obj runtime.Object) admission.Verdict {
	engine := a.engine
	if p, ok := obj.(*policyv1.CapacityPolicy); ok {
		// The cluster admits a policy by the policies in force before it.
		engine, _ = a.engine.Variant(p.Name, a.cluster[p.Name])
	}
	r := admission.New(engine, a.facts, func() time.Time { return a.now }).AtPoint(policyv1.PointCI).
		WithNodeRepair(a.gates["NodeRepair"]).WithStaticCapacity(a.gates["StaticCapacity"]).
		WithNodeOverlay(a.gates["NodeOverlay"]).WithCapacityBuffer(a.gates["CapacityBuffer"])
	if a.existing == nil {
		return r.Review(ctx, admission.OperationUnknown, obj, nil)
	}
	if old, ok := a.existing[objectKey(obj)]; ok {
		return r.Review(ctx, "UPDATE", obj, old)
	}
	return r.Review(ctx, "CREATE", obj, nil)
}

// UnknownInput says what an unknown input of admission is and which flag gives it.
func UnknownInput(ref string) string {
	switch ref {
	case policies.UnknownNamespaceLabels:
		return "namespace labels (give --namespaces)"
	case policies.UnknownUsage:
		return "what the namespace runs at (give --nodes)"
	case policies.UnknownOperation, policies.UnknownOldObject:
		return "whether the object exists in the cluster, and as what (validate cannot know; plan reads it from --base)"
	}
	return ref
}
