package conversion

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsv1beta1 "github.com/karpenter-policy/karpenter/api/aws/v1beta1"
	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
)

// roundTrips is how many random objects each kind and direction is checked with in `go test`.
const roundTrips = 1000

var converter = &Converter{DefaultNodeClass: KWOKNodeClass}

func pick[T any](c randfill.Continue, values ...T) T { return values[c.Intn(len(values))] }

// filler makes random objects: every field filled at random, except where a value must parse
// (durations, quantities, times at second precision, as the API server stores them) or where
// conversion legitimately owns the value (compatibility annotations).
func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.25).NumElements(0, 3).Funcs(
		func(d *karpv1.NillableDuration, c randfill.Continue) {
			*d = karpv1.MustParseNillableDuration(pick(c, "Never", "0s", "30s", "5m", "1h30m", "720h"))
		},
		func(d *metav1.Duration, c randfill.Continue) {
			d.Duration = time.Duration(c.Intn(100000)) * time.Second
		},
		func(q *resource.Quantity, c randfill.Continue) {
			*q = resource.MustParse(pick(c, "0", "1", "250m", "2Gi", "100", "16Ki", "1.5"))
		},
		func(t *metav1.Time, c randfill.Continue) {
			if c.Intn(4) == 0 {
				*t = metav1.Time{}
				return
			}
			*t = metav1.Unix(int64(1_700_000_000+c.Intn(100_000_000)), 0).Rfc3339Copy()
		},
		func(m *metav1.ObjectMeta, c randfill.Continue) {
			*m = metav1.ObjectMeta{Name: fmt.Sprintf("obj-%d", c.Intn(1000)), Generation: int64(c.Intn(10))}
			c.Fill(&m.Labels)
			c.Fill(&m.Annotations)
			for k := range m.Annotations {
				if IsCompatibilityAnnotation(k) {
					delete(m.Annotations, k)
				}
			}
			if c.Intn(3) == 0 {
				m.Annotations = map[string]string{"team": "a"}
			}
		},
		func(p *karpv1beta1.ConsolidationPolicy, c randfill.Continue) {
			*p = pick(c, karpv1beta1.ConsolidationPolicyWhenEmpty, karpv1beta1.ConsolidationPolicyWhenUnderutilized)
		},
		func(p *karpv1.ConsolidationPolicy, c randfill.Continue) {
			*p = pick(c, karpv1.ConsolidationPolicyWhenEmpty, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, karpv1.ConsolidationPolicyBalanced)
		},
		func(r *karpv1beta1.NodeClassReference, c randfill.Continue) {
			*r = karpv1beta1.NodeClassReference{
				APIVersion: pick(c, "", "karpenter.k8s.aws/v1beta1", "karpenter.k8s.aws/v1", "karpenter.kwok.sh/v1alpha1", "example.com/v2", c.String(8)),
				Kind:       pick(c, "", "EC2NodeClass", "KWOKNodeClass", c.String(8)),
				Name:       c.String(10),
			}
		},
		func(r *karpv1.NodeClassReference, c randfill.Continue) {
			*r = karpv1.NodeClassReference{
				Group: pick(c, "", "karpenter.k8s.aws", "karpenter.kwok.sh", "example.com", c.String(8)),
				Kind:  pick(c, "", "EC2NodeClass", "KWOKNodeClass", c.String(8)),
				Name:  c.String(10),
			}
		},
		func(f **string, c randfill.Continue) {
			if c.Intn(4) == 0 {
				*f = nil
				return
			}
			s := pick(c, "AL2", "AL2023", "Bottlerocket", "Ubuntu", "Custom", "Windows2019", "Windows2022", c.String(5))
			*f = &s
		},
		func(t *awsv1.AMISelectorTerm, c randfill.Continue) {
			c.FillNoCustom(t)
			if c.Intn(2) == 0 {
				*t = awsv1.AMISelectorTerm{Alias: pick(c, "al2023@latest", "al2@latest", "bottlerocket@v1.20.0", "windows2022@latest", "ubuntu@latest")}
			}
		},
	)
}

// normalized is an object as JSON, the form the API server stores, so that nil and empty
// collections compare equal as they do there.
func normalized(t *testing.T, obj any) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out, _ := json.MarshalIndent(m, "", " ")
	return string(out)
}

// roundTrip checks that converting a random original to the other version and back gives
// the original.
func roundTrip[A any, B any](t *testing.T, seed int64, newA func() *A, there func(context.Context, *A, *B) error, back func(context.Context, *B, *A) error) {
	t.Helper()
	roundTripN(t, seed, roundTrips, newA, there, back)
}

func roundTripN[A any, B any](t *testing.T, seed int64, n int, newA func() *A, there func(context.Context, *A, *B) error, back func(context.Context, *B, *A) error) {
	t.Helper()
	f := filler(seed)
	ctx := context.Background()
	for i := range n {
		random := newA()
		f.Fill(random)
		setTypeMeta(random)
		// The webhook receives objects as JSON: start from what decoding that JSON gives.
		original := newA()
		if b, err := json.Marshal(random); err != nil {
			t.Fatal(err)
		} else if err := json.Unmarshal(b, original); err != nil {
			t.Fatal(err)
		}
		var middle B
		if err := there(ctx, original, &middle); err != nil {
			t.Fatalf("object %d: converting: %v", i, err)
		}
		got := newA()
		if err := back(ctx, &middle, got); err != nil {
			t.Fatalf("object %d: converting back: %v", i, err)
		}
		want, have := normalized(t, original), normalized(t, got)
		if want != have {
			t.Fatalf("object %d (seed %d) did not survive the round trip\noriginal:\n%s\nthrough the other version:\n%s\nback:\n%s",
				i, seed, want, normalized(t, &middle), have)
		}
	}
}

func TestNodePoolRoundTrip(t *testing.T) {
	t.Run("v1beta1->v1->v1beta1", func(t *testing.T) {
		roundTrip(t, 1, func() *karpv1beta1.NodePool { return &karpv1beta1.NodePool{} }, converter.NodePoolToV1, converter.NodePoolToV1beta1)
	})
	t.Run("v1->v1beta1->v1", func(t *testing.T) {
		roundTrip(t, 2, func() *karpv1.NodePool { return &karpv1.NodePool{} }, converter.NodePoolToV1beta1, converter.NodePoolToV1)
	})
}

func TestNodeClaimRoundTrip(t *testing.T) {
	t.Run("v1beta1->v1->v1beta1", func(t *testing.T) {
		roundTrip(t, 3, func() *karpv1beta1.NodeClaim { return &karpv1beta1.NodeClaim{} }, converter.NodeClaimToV1, converter.NodeClaimToV1beta1)
	})
	t.Run("v1->v1beta1->v1", func(t *testing.T) {
		roundTrip(t, 4, func() *karpv1.NodeClaim { return &karpv1.NodeClaim{} }, converter.NodeClaimToV1beta1, converter.NodeClaimToV1)
	})
}

func TestEC2NodeClassRoundTrip(t *testing.T) {
	t.Run("v1beta1->v1->v1beta1", func(t *testing.T) {
		roundTrip(t, 5, func() *awsv1beta1.EC2NodeClass { return &awsv1beta1.EC2NodeClass{} }, converter.EC2NodeClassToV1, converter.EC2NodeClassToV1beta1)
	})
	t.Run("v1->v1beta1->v1", func(t *testing.T) {
		roundTrip(t, 6, func() *awsv1.EC2NodeClass { return &awsv1.EC2NodeClass{} }, converter.EC2NodeClassToV1beta1, converter.EC2NodeClassToV1)
	})
}

// setTypeMeta gives a random object the apiVersion and kind of its Go type, as the API server
// does.
func setTypeMeta(obj any) {
	gvks, _, err := scheme.ObjectKinds(obj.(runtime.Object))
	if err != nil {
		panic(err)
	}
	obj.(runtime.Object).GetObjectKind().SetGroupVersionKind(gvks[0])
}

var scheme = install.NewScheme()

// FuzzRoundTrip explores more random objects than the fixed seeds of the tests above:
// go test ./webhooks/conversion -run=^$ -fuzz=FuzzRoundTrip -fuzztime=60s
func FuzzRoundTrip(f *testing.F) {
	for seed := range int64(6) {
		for kind := range uint8(6) {
			f.Add(seed, kind)
		}
	}
	f.Fuzz(func(t *testing.T, seed int64, kind uint8) {
		switch kind % 6 {
		case 0:
			roundTripN(t, seed, 20, func() *karpv1beta1.NodePool { return &karpv1beta1.NodePool{} }, converter.NodePoolToV1, converter.NodePoolToV1beta1)
		case 1:
			roundTripN(t, seed, 20, func() *karpv1.NodePool { return &karpv1.NodePool{} }, converter.NodePoolToV1beta1, converter.NodePoolToV1)
		case 2:
			roundTripN(t, seed, 20, func() *karpv1beta1.NodeClaim { return &karpv1beta1.NodeClaim{} }, converter.NodeClaimToV1, converter.NodeClaimToV1beta1)
		case 3:
			roundTripN(t, seed, 20, func() *karpv1.NodeClaim { return &karpv1.NodeClaim{} }, converter.NodeClaimToV1beta1, converter.NodeClaimToV1)
		case 4:
			roundTripN(t, seed, 20, func() *awsv1beta1.EC2NodeClass { return &awsv1beta1.EC2NodeClass{} }, converter.EC2NodeClassToV1, converter.EC2NodeClassToV1beta1)
		case 5:
			roundTripN(t, seed, 20, func() *awsv1.EC2NodeClass { return &awsv1.EC2NodeClass{} }, converter.EC2NodeClassToV1beta1, converter.EC2NodeClassToV1)
		}
	})
}
