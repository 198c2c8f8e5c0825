package offline

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsv1beta1 "github.com/karpenter-policy/karpenter/api/aws/v1beta1"
	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	crds "github.com/karpenter-policy/karpenter/config/crd"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/webhooks/admission"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

// Problem is one reason an object is invalid, located in its file.
type Problem struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Field string `json:"field"`
	// Policy names the policy whose admission rule said it ("policy NAME" is its Field);
	// Rule is the rule its result names.
	Policy  string `json:"policy,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Field == "" {
		return fmt.Sprintf("%s:%d: %s/%s: %s", p.File, p.Line, p.Kind, p.Name, p.Message)
	}
	return fmt.Sprintf("%s:%d: %s/%s: %s: %s", p.File, p.Line, p.Kind, p.Name, p.Field, p.Message)
}

// Report is the outcome of validating a set of documents.
type Report struct {
	// Objects are the objects of this project's kinds that were checked.
	Objects int `json:"objects"`
	Valid   int `json:"valid"`
	Invalid int `json:"invalid"`
	// Skipped counts documents of other kinds.
	Skipped  int       `json:"skipped"`
	Problems []Problem `json:"problems"`
	// Warnings are what admission would warn about on valid objects: fields accepted but
	// not acted on yet, policies' warn and dry-run results, the cost impact. They do not make
	// an object invalid.
	Warnings []Problem `json:"warnings"`
	// Notes are what admission says of a valid object's cost and scope (its cpu limit in
	// dollars, what a budget allows, the namespaces a policy governs): information, not warnings.
	Notes []Problem `json:"notes"`
	// Undecided are policies' admission rules that read what the inputs do not say (namespace
	// labels, usage, whether the object exists): neither passed nor failed.
	Undecided []Problem `json:"undecided"`
	// UnknownInputs say what the undecided rules read that the inputs did not give.
	UnknownInputs []string `json:"unknownInputs"`
}

// Validator checks documents as the cluster would: schema, defaults and CEL, then the
// validating webhooks (v1beta1 objects converted to v1 first, as matchPolicy Equivalent does).
type Validator struct {
	Schemas   *Schemas
	Converter *conversion.Converter
	Webhooks  *validation.Validator
	// Admission, when set, runs the webhook's policy review on every valid object, at the ci
	// enforcement point: a deny makes the object invalid.
	Admission *Admission
	scheme    *runtime.Scheme
}

// embeddedSchemas compiles the embedded CRDs once per process: compiling their CEL rules is
// most of a validate run's time, the CRDs never change within a process, and Schemas is
// read-only once loaded, so every Validator may share it.
var embeddedSchemas = sync.OnceValues(func() (*Schemas, error) { return LoadSchemas(crds.Bases, "bases") })

// NewValidator loads the embedded CRDs. defaultNodeClass is the node class a v1beta1
// nodeClassRef without kind means, as the cluster's cloud provider decides.
func NewValidator(conv *conversion.Converter) (*Validator, error) {
	s, err := embeddedSchemas()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded CRDs: %w", err)
	}
	return &Validator{Schemas: s, Converter: conv, Webhooks: validation.New(), scheme: install.NewScheme()}, nil
}

// Validate checks every document and returns the problems in file and line order.
func (v *Validator) Validate(ctx context.Context, docs []Document) Report {
	r := Report{Problems: []Problem{}, Warnings: []Problem{}, Notes: []Problem{}, Undecided: []Problem{}, UnknownInputs: []string{}}
	unknown := map[string]bool{}
	for i := range docs {
		d := &docs[i]
		if d.Object == nil {
			continue
		}
		gvk := d.GVK()
		if !v.Schemas.Knows(gvk.GroupKind()) {
			r.Skipped++
			continue
		}
		r.Objects++
		errs, warns, hub := v.validate(ctx, d)
		for _, w := range warns {
			r.Warnings = append(r.Warnings, Problem{File: d.File, Line: lineOf(d, w), Kind: gvk.Kind, Name: d.Name(), Field: w.Field, Message: w.Detail})
		}
		var denials []Problem
		if len(errs) == 0 && v.Admission != nil && hub != nil {
			denials = v.review(ctx, d, hub, &r, unknown)
		}
		if len(errs) == 0 && len(denials) == 0 {
			r.Valid++
			continue
		}
		r.Invalid++
		for _, e := range errs {
			r.Problems = append(r.Problems, Problem{File: d.File, Line: lineOf(d, e), Kind: gvk.Kind, Name: d.Name(), Field: e.Field, Message: e.ErrorBody()})
		}
		r.Problems = append(r.Problems, denials...)
	}
	for _, ref := range []string{policies.UnknownNamespaceLabels, policies.UnknownUsage, policies.UnknownOperation} {
		if unknown[ref] || (ref == policies.UnknownOperation && unknown[policies.UnknownOldObject]) {
			r.UnknownInputs = append(r.UnknownInputs, UnknownInput(ref))
		}
	}
	for _, ps := range [][]Problem{r.Problems, r.Warnings, r.Notes, r.Undecided} {
		sort.SliceStable(ps, func(i, j int) bool {
			a, b := ps[i], ps[j]
			if a.File != b.File {
				return a.File < b.File
			}
			return a.Line < b.Line
		})
	}
	return r
}

// review runs the policy review on a valid object: its denials are returned as problems, its
// warnings and undecided rules go into the report.
func (v *Validator) review(ctx context.Context, d *Document, hub runtime.Object, r *Report, unknown map[string]bool) []Problem {
	gvk := d.GVK()
	verdict := v.Admission.Review(ctx, hub)
	at := func(x admission.Result) Problem {
		p := Problem{File: d.File, Line: d.Line, Kind: gvk.Kind, Name: d.Name(), Policy: x.Policy(), Rule: x.Rule, Message: x.Message}
		if p.Policy != "" {
			p.Field = "policy " + p.Policy
		}
		return p
	}
	var denials []Problem
	for _, x := range verdict.Denials {
		denials = append(denials, at(x))
	}
	for _, x := range verdict.Warnings {
		p := at(x)
		switch x.Kind {
		case admission.Undecided:
			r.Undecided = append(r.Undecided, p)
			for _, u := range verdict.Undecided {
				if u.Source == x.Source && u.Says() == x.Message {
					var why []string
					for _, ref := range u.Reads {
						if w := UnknownInput(ref); !slices.Contains(why, w) {
							why = append(why, w)
						}
					}
					r.Undecided[len(r.Undecided)-1].Message += ": " + strings.Join(why, "; ")
				}
			}
		case admission.Info:
			r.Notes = append(r.Notes, p)
		case admission.DryRun, admission.Error:
			p.Message = x.Text()
			r.Warnings = append(r.Warnings, p)
		default:
			r.Warnings = append(r.Warnings, p)
		}
	}
	for _, u := range verdict.Undecided {
		for _, ref := range u.Reads {
			unknown[ref] = true
		}
	}
	return denials
}

// validate returns the document's problems, the warnings admission would give it, and the
// object as the webhooks see it (v1beta1 converted to v1), nil when it is invalid.
func (v *Validator) validate(ctx context.Context, d *Document) (errs, warnings field.ErrorList, hub runtime.Object) {
	gvk := d.GVK()
	obj := runtime.DeepCopyJSON(d.Object)
	if errs := v.Schemas.Validate(ctx, gvk, obj); len(errs) > 0 {
		// The API server stops here too: webhooks only see objects that pass the schema.
		return errs, nil, nil
	}
	typed, err := v.scheme.New(gvk)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}, nil, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, typed); err != nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("decoding: %w", err))}, nil, nil
	}
	errs, hub = v.webhook(ctx, typed)
	if len(errs) > 0 {
		hub = nil
	}
	return errs, v.notActedOn(ctx, typed), hub
}

// notActedOn are the fields admission warns about as accepted but not acted on yet.
func (v *Validator) notActedOn(ctx context.Context, obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *awsv1.EC2NodeClass:
		return o.FieldsNotActedOn()
	case *awsv1beta1.EC2NodeClass:
		hub := &awsv1.EC2NodeClass{}
		if err := v.Converter.EC2NodeClassToV1(ctx, o, hub); err != nil {
			return nil
		}
		return hub.FieldsNotActedOn()
	case *autoscalingv1beta1.CapacityBuffer:
		return o.FieldsNotActedOn()
	case *policyv1.CapacityPolicy:
		return o.FieldsNotActedOn()
	case *policyv1.CapacityBudget:
		return o.FieldsNotActedOn()
	case *policyv1.CapacityException:
		return o.FieldsNotActedOn()
	case *policyv1.ClusterCapacityBudget:
		return o.FieldsNotActedOn()
	}
	return nil
}

// webhook runs the validating webhook of an object's kind, converting v1beta1 to v1 first;
// it returns the object the webhook saw.
func (v *Validator) webhook(ctx context.Context, obj runtime.Object) (field.ErrorList, runtime.Object) {
	internal := func(err error) (field.ErrorList, runtime.Object) {
		return field.ErrorList{field.InternalError(nil, err)}, nil
	}
	switch o := obj.(type) {
	case *karpv1.NodePool:
		return v.Webhooks.NodePool(o), o
	case *karpv1beta1.NodePool:
		hub := &karpv1.NodePool{}
		if err := v.Converter.NodePoolToV1(ctx, o, hub); err != nil {
			return internal(err)
		}
		return v.Webhooks.NodePool(hub), hub
	case *karpv1.NodeClaim:
		return v.Webhooks.NodeClaim(o), o
	case *karpv1beta1.NodeClaim:
		hub := &karpv1.NodeClaim{}
		if err := v.Converter.NodeClaimToV1(ctx, o, hub); err != nil {
			return internal(err)
		}
		return v.Webhooks.NodeClaim(hub), hub
	case *awsv1.EC2NodeClass:
		return v.Webhooks.EC2NodeClass(o), o
	case *awsv1beta1.EC2NodeClass:
		hub := &awsv1.EC2NodeClass{}
		if err := v.Converter.EC2NodeClassToV1(ctx, o, hub); err != nil {
			return internal(err)
		}
		return v.Webhooks.EC2NodeClass(hub), hub
	case *kwokv1alpha1.KWOKNodeClass:
		return v.Webhooks.KWOKNodeClass(o), o
	case *karpv1alpha1.NodeOverlay:
		return v.Webhooks.NodeOverlay(o), o
	case *policyv1.CapacityBudget:
		return v.Webhooks.CapacityBudget(o), o
	case *policyv1.CapacityPolicy:
		return v.Webhooks.CapacityPolicy(ctx, o), o
	case *policyv1.CapacityException:
		return v.Webhooks.CapacityException(o, nil), o
	case *policyv1.ClusterCapacityBudget:
		return v.Webhooks.ClusterCapacityBudget(o), o
	}
	return nil, obj
}

// regoLine finds "module.rego:LINE:" in a policy problem.
var regoLine = regexp.MustCompile(`\.rego:(\d+):`)

// lineOf is the file line of a problem: the field's, or for a problem inside a Rego module
// written as a block scalar, the line of the Rego itself.
func lineOf(d *Document, e *field.Error) int {
	if strings.HasSuffix(e.Field, ".rego") {
		if m := regoLine.FindStringSubmatch(e.Detail); m != nil {
			n, _ := strconv.Atoi(m[1])
			if line, ok := d.BlockScalarLine(e.Field, n); ok {
				return line
			}
		}
	}
	return d.LineOf(e.Field)
}

// Objects are the documents of this project's kinds decoded as the webhooks see them (v1beta1
// converted to v1), without validation: the cluster's objects as plan's base has them.
// Documents that do not decode are left out.
func (v *Validator) Objects(ctx context.Context, docs []Document) []runtime.Object {
	var out []runtime.Object
	for i := range docs {
		d := &docs[i]
		if d.Object == nil || !v.Schemas.Knows(d.GVK().GroupKind()) {
			continue
		}
		typed, err := v.scheme.New(d.GVK())
		if err != nil {
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(d.Object), typed); err != nil {
			continue
		}
		if _, hub := v.webhook(ctx, typed); hub != nil {
			out = append(out, hub)
		}
	}
	return out
}
