// Package offline validates and converts manifests without a cluster, with the same code the
// cluster runs: the CRDs' OpenAPI schemas, defaults and CEL rules (evaluated with the
// apiextensions-apiserver libraries from the embedded CRD YAML, so no rule is written twice),
// then the webhook validators and converters. It backs `karpenterctl validate` and `convert`.
package offline

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// unknownField starts the message of a field the schema does not have.
const unknownField = "unknown field: not in the schema"

// versionSchema is what the API server checks an object of one served version against.
type versionSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
	namespaced bool
}

// Schemas are the schemas of every served version of the CRDs, by group, version and kind.
// A Schemas is not changed once LoadSchemas returns it, so it may be shared.
type Schemas struct {
	byGVK map[schema.GroupVersionKind]*versionSchema
	// groups are the API groups the CRDs define, to tell unserved versions from other kinds.
	groups map[schema.GroupKind][]string
}

// LoadSchemas reads every CRD in fsys (YAML files at its root or in dir).
func LoadSchemas(fsys fs.FS, dir string) (*Schemas, error) {
	s := &Schemas{byGVK: map[schema.GroupVersionKind]*versionSchema{}, groups: map[schema.GroupKind][]string{}}
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		if err := s.add(crd); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
	}
	return s, nil
}

func (s *Schemas) add(crd *apiextensionsv1.CustomResourceDefinition) error {
	gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return err
		}
		structural, err := structuralschema.NewStructural(internal)
		if err != nil {
			return fmt.Errorf("version %s: %w", v.Name, err)
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(internal)
		if err != nil {
			return fmt.Errorf("version %s: %w", v.Name, err)
		}
		s.byGVK[gk.WithVersion(v.Name)] = &versionSchema{
			structural: structural,
			validator:  validator,
			cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
			namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		}
		s.groups[gk] = append(s.groups[gk], v.Name)
	}
	return nil
}

// Knows reports whether the kind is one of the CRDs', at any version.
func (s *Schemas) Knows(gk schema.GroupKind) bool { return len(s.groups[gk]) > 0 }

// Validate defaults obj as the API server would, and checks it against its version's schema,
// list types and CEL rules. Unknown fields are reported, as kubectl's strict field validation
// does. obj is changed in place: it ends up defaulted and pruned.
func (s *Schemas) Validate(ctx context.Context, gvk schema.GroupVersionKind, obj map[string]any) field.ErrorList {
	vs, ok := s.byGVK[gvk]
	if !ok {
		return field.ErrorList{field.NotSupported(field.NewPath("apiVersion"), gvk.GroupVersion().String(),
			servedVersions(gvk.Group, s.groups[gvk.GroupKind()]))}
	}
	var errs field.ErrorList
	for _, unknown := range pruning.PruneWithOptions(obj, vs.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		errs = append(errs, field.Forbidden(field.NewPath(strings.TrimPrefix(unknown, ".")), unknownField+" of "+gvk.GroupVersion().String()+" "+gvk.Kind))
	}
	defaulting.Default(obj, vs.structural)
	if name, _, _ := nestedString(obj, "metadata", "name"); name == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), "every object needs a name"))
	}
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, vs.validator)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, vs.structural, obj)...)
	celErrs, _ := vs.cel.Validate(ctx, nil, vs.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	errs = append(errs, celErrs...)
	return errs
}

func servedVersions(group string, versions []string) []string {
	out := make([]string, len(versions))
	for i, v := range versions {
		out[i] = group + "/" + v
	}
	return out
}

func nestedString(obj map[string]any, fields ...string) (string, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur, ok = m[f]
		if !ok {
			return "", false, nil
		}
	}
	s, ok := cur.(string)
	return s, ok, nil
}
