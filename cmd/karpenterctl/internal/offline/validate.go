package offline

import (
	"context"
	"fmt"
	"regexp"
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
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

// Problem is one reason an object is invalid, located in its file.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (p Problem) String() string {
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
	// not acted on yet. They do not make an object invalid.
	Warnings []Problem `json:"warnings"`
}

// Validator checks documents as the cluster would: schema, defaults and CEL, then the
// validating webhooks (v1beta1 objects converted to v1 first, as matchPolicy Equivalent does).
type Validator struct {
	Schemas   *Schemas
	Converter *conversion.Converter
	Webhooks  *validation.Validator
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
	r := Report{Problems: []Problem{}, Warnings: []Problem{}}
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
		errs, warns := v.validate(ctx, d)
		for _, w := range warns {
			r.Warnings = append(r.Warnings, Problem{File: d.File, Line: lineOf(d, w), Kind: gvk.Kind, Name: d.Name(), Field: w.Field, Message: w.Detail})
		}
		if len(errs) == 0 {
			r.Valid++
			continue
		}
		r.Invalid++
		for _, e := range errs {
			r.Problems = append(r.Problems, Problem{File: d.File, Line: lineOf(d, e), Kind: gvk.Kind, Name: d.Name(), Field: e.Field, Message: e.ErrorBody()})
		}
	}
	for _, ps := range [][]Problem{r.Problems, r.Warnings} {
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

// validate returns the document's problems, and the warnings admission would give it.
func (v *Validator) validate(ctx context.Context, d *Document) (errs, warnings field.ErrorList) {
	gvk := d.GVK()
	obj := runtime.DeepCopyJSON(d.Object)
	if errs := v.Schemas.Validate(ctx, gvk, obj); len(errs) > 0 {
		// The API server stops here too: webhooks only see objects that pass the schema.
		return errs, nil
	}
	typed, err := v.scheme.New(gvk)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, typed); err != nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("decoding: %w", err))}, nil
	}
	return v.webhook(ctx, typed), v.notActedOn(ctx, typed)
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
	}
	return nil
}

// webhook runs the validating webhook of an object's kind, converting v1beta1 to v1 first.
func (v *Validator) webhook(ctx context.Context, obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *karpv1.NodePool:
		return v.Webhooks.NodePool(o)
	case *karpv1beta1.NodePool:
		hub := &karpv1.NodePool{}
		if err := v.Converter.NodePoolToV1(ctx, o, hub); err != nil {
			return field.ErrorList{field.InternalError(nil, err)}
		}
		return v.Webhooks.NodePool(hub)
	case *karpv1.NodeClaim:
		return v.Webhooks.NodeClaim(o)
	case *karpv1beta1.NodeClaim:
		hub := &karpv1.NodeClaim{}
		if err := v.Converter.NodeClaimToV1(ctx, o, hub); err != nil {
			return field.ErrorList{field.InternalError(nil, err)}
		}
		return v.Webhooks.NodeClaim(hub)
	case *awsv1.EC2NodeClass:
		return v.Webhooks.EC2NodeClass(o)
	case *awsv1beta1.EC2NodeClass:
		hub := &awsv1.EC2NodeClass{}
		if err := v.Converter.EC2NodeClassToV1(ctx, o, hub); err != nil {
			return field.ErrorList{field.InternalError(nil, err)}
		}
		return v.Webhooks.EC2NodeClass(hub)
	case *kwokv1alpha1.KWOKNodeClass:
		return v.Webhooks.KWOKNodeClass(o)
	case *karpv1alpha1.NodeOverlay:
		return v.Webhooks.NodeOverlay(o)
	case *policyv1.CapacityBudget:
		return v.Webhooks.CapacityBudget(o)
	case *policyv1.CapacityPolicy:
		return v.Webhooks.CapacityPolicy(ctx, o)
	}
	return nil
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
