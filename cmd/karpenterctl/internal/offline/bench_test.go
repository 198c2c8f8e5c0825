package offline

import (
	"context"
	"os"
	"testing"

	"github.com/karpenter-policy/karpenter/webhooks/conversion"
)

// What karpenterctl validate spends per object (schema, defaults, CEL, webhook validator):
// go test ./cmd/karpenterctl/internal/offline -run=^$ -bench=. -benchmem

func BenchmarkValidateSamples(b *testing.B) {
	v, err := NewValidator(&conversion.Converter{DefaultNodeClass: conversion.KWOKNodeClass})
	if err != nil {
		b.Fatal(err)
	}
	var docs []Document
	for _, f := range []string{"../../config/samples/10-nodepool-general.yaml", "../../config/samples/20-nodepool-spot.yaml",
		"../../config/samples/examples/ec2nodeclass.yaml", "../../config/samples/examples/nodepool-v1beta1.yaml",
		"../../config/samples/examples/capacitybudget.yaml"} {
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
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := v.Validate(ctx, docs); r.Invalid > 0 || r.Objects != len(docs) {
			b.Fatalf("%+v", r)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(docs)), "ns/object")
}
