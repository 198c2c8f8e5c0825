package offline

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
)

// What karpenterctl validate spends per object (schema, defaults, CEL, webhook validator):
// go test ./cmd/karpenterctl/internal/offline -run=^$ -bench=. -benchmem

func BenchmarkValidateSamples(b *testing.B) { benchmarkValidate(b, false) }

// The same with the webhook's policy review offline (the sample CapacityPolicy, namespace
// labels and usage known): what validate spends per object in a pull request's CI.
func BenchmarkValidateSamplesWithAdmission(b *testing.B) { benchmarkValidate(b, true) }

func benchmarkValidate(b *testing.B, withAdmission bool) {
	v, err := NewValidator(&conversion.Converter{DefaultNodeClass: conversion.KWOKNodeClass})
	if err != nil {
		b.Fatal(err)
	}
	var docs []Document
	for _, f := range []string{"../../../../config/samples/10-nodepool-general.yaml", "../../../../config/samples/20-nodepool-spot.yaml",
		"../../../../config/samples/examples/ec2nodeclass.yaml", "../../../../config/samples/examples/nodepool-v1beta1.yaml",
		"../../../../config/samples/examples/capacitybudget.yaml"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		d, err := Parse(f, raw)
		if err != nil {
			b.Fatal(err)
		}
		docs = append(docs, d...)
	}
	if withAdmission {
		raw, err := os.ReadFile("../../../../config/samples/examples/capacitypolicy.yaml")
		if err != nil {
			b.Fatal(err)
		}
		pdocs, err := Parse("capacitypolicy.yaml", raw)
		if err != nil {
			b.Fatal(err)
		}
		pols, err := LoadPolicies(pdocs)
		if err != nil {
			b.Fatal(err)
		}
		facts := &Cluster{Known: map[string]policies.Namespace{"team-a": {Name: "team-a", Labels: map[string]string{"tier": "dev"}}},
			AllNamespaces: true, ByNamespace: map[string]policies.Usage{}, Types: catalog.Embedded().ForProvider()}
		if v.Admission, err = NewAdmission(AdmissionSettings{Cluster: pols, Facts: facts, Now: time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC),
			Existing: []runtime.Object{}}); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := v.Validate(ctx, docs); r.Invalid > 0 || r.Objects != len(docs) {
			b.Fatalf("%+v", r)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(docs)), "ns/object")
}
