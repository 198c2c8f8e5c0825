package conversion

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
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
		// v1beta1 has no status.capacityReservations: the node class controller writes status
		// at v1, the storage version, so a v1beta1 reader sees none (docs/conversion.md).
		func(r *[]awsv1.CapacityReservation, c randfill.Continue) { *r = nil },
		func(k *awsv1.KubeletConfiguration, c randfill.Continue) {
			if c.Intn(4) == 0 {
				return
			}
			*k = awsv1.KubeletConfiguration{
				"maxPods":             {Raw: []byte(strconv.Itoa(c.Intn(250)))},
				"kubeReserved":        {Raw: []byte(`{"cpu":"` + pick(c, "100m", "0.1", "250m") + `"}`)},
				"serializeImagePulls": {Raw: []byte(pick(c, "true", "false"))},
			}
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

// roundTrip checks that converting a random original, its durations and quantities spelled
// as a person might (respell), to the other version and back gives the original, text and
// all, through Converter.Unstructured as the webhook and `karpenterctl convert` run it.
func roundTrip[A any](t *testing.T, seed int64, newA func() *A, to string) {
	t.Helper()
	roundTripN(t, seed, roundTrips, newA, to)
}

func roundTripN[A any](t *testing.T, seed int64, n int, newA func() *A, to string) {
	t.Helper()
	f := filler(seed)
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	ctx := context.Background()
	for i := range n {
		random := newA()
		f.Fill(random)
		setTypeMeta(random)
		// The webhook receives objects as JSON: start from that JSON (in the shape the
		// unstructured converter gives, so that {} and an absent field compare alike),
		// respelled.
		original, err := runtime.DefaultUnstructuredConverter.ToUnstructured(random)
		if err != nil {
			t.Fatal(err)
		}
		respell(original, r)
		from, _ := original["apiVersion"].(string)
		middle, err := converter.Unstructured(ctx, original, to)
		if err != nil {
			t.Fatalf("object %d: converting: %v", i, err)
		}
		got, err := converter.Unstructured(ctx, middle, strings.TrimPrefix(from, from[:strings.Index(from, "/")+1]))
		if err != nil {
			t.Fatalf("object %d: converting back: %v", i, err)
		}
		// An empty object or list and an absent one are the same object to the API server.
		want, have := normalized(t, pruned(original)), normalized(t, pruned(got))
		if want != have {
			t.Fatalf("object %d (seed %d) did not survive the round trip\noriginal:\n%s\nthrough the other version:\n%s\nback:\n%s",
				i, seed, want, normalized(t, middle), have)
		}
	}
}

// pruned drops nulls and empty objects and lists, recursively.
func pruned(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if p := pruned(e); p != nil {
				out[k] = p
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			out = append(out, pruned(e))
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}

// respell rewrites, at random, the durations and quantities of a JSON object into other
// spellings of the same value ("10m0s" as "10m" or "600s", "1k" as "1000", "250m" as "0.25",
// "2Gi" as "2048Mi"), as hand-written manifests have them.
func respell(v any, r *rand.Rand) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok {
				if alts := spellings(s); len(alts) > 0 && r.IntN(2) == 0 {
					x[k] = alts[r.IntN(len(alts))]
				}
				continue
			}
			respell(e, r)
		}
	case []any:
		for _, e := range x {
			respell(e, r)
		}
	}
}

// spellings are other ways to write a duration or a quantity; none for a string that could be
// either ("250m": 250 minutes or a quarter of a CPU), since its field decides.
func spellings(s string) []string {
	d, durErr := time.ParseDuration(s)
	q, qErr := resource.ParseQuantity(s)
	var out []string
	switch {
	case durErr == nil && qErr == nil:
	case durErr == nil && d > 0:
		switch {
		case d%time.Hour == 0:
			out = append(out, fmt.Sprintf("%dh", d/time.Hour), fmt.Sprintf("%dm", d/time.Minute))
		case d%(30*time.Minute) == 0:
			out = append(out, fmt.Sprintf("%.1fh", d.Hours()), fmt.Sprintf("%dm", d/time.Minute))
		case d%time.Minute == 0:
			out = append(out, fmt.Sprintf("%dm", d/time.Minute), fmt.Sprintf("%ds", d/time.Second))
		case d%time.Second == 0:
			out = append(out, fmt.Sprintf("%ds", d/time.Second))
		}
	case qErr == nil:
		if m := q.MilliValue(); m%1000 == 0 {
			out = append(out, strconv.FormatInt(m/1000, 10))
			if m%(1000*1024) == 0 && m > 0 {
				out = append(out, fmt.Sprintf("%dKi", m/1000/1024))
			}
		} else {
			out = append(out, strconv.FormatFloat(float64(m)/1000, 'f', -1, 64))
		}
	}
	var alts []string
	for _, a := range out {
		if a != s {
			alts = append(alts, a)
		}
	}
	return alts
}

func TestNodePoolRoundTrip(t *testing.T) {
	t.Run("v1beta1->v1->v1beta1", func(t *testing.T) {
		roundTrip(t, 1, func() *karpv1beta1.NodePool { return &karpv1beta1.NodePool{} }, "v1")
	})
	t.Run("v1->v1beta1->v1", func(t *testing.T) {
		roundTrip(t, 2, func() *karpv1.NodePool { return &karpv1.NodePool{} }, "v1beta1")
	})
}

func TestNodeClaimRoundTrip(t *testing.T) {
	t.Run("v1beta1->v1->v1beta1", func(t *testing.T) {
		roundTrip(t, 3, func() *karpv1beta1.NodeClaim { return &karpv1beta1.NodeClaim{} }, "v1")
	})
	t.Run("v1->v1beta1->v1", func(t *testing.T) {
		roundTrip(t, 4, func() *karpv1.NodeClaim { return &karpv1.NodeClaim{} }, "v1beta1")
	})
}

func TestEC2NodeClassRoundTrip(t *testing.T) {
	t.Run("v1beta1->v1->v1beta1", func(t *testing.T) {
		roundTrip(t, 5, func() *awsv1beta1.EC2NodeClass { return &awsv1beta1.EC2NodeClass{} }, "v1")
	})
	t.Run("v1->v1beta1->v1", func(t *testing.T) {
		roundTrip(t, 6, func() *awsv1.EC2NodeClass { return &awsv1.EC2NodeClass{} }, "v1beta1")
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
			roundTripN(t, seed, 20, func() *karpv1beta1.NodePool { return &karpv1beta1.NodePool{} }, "v1")
		case 1:
			roundTripN(t, seed, 20, func() *karpv1.NodePool { return &karpv1.NodePool{} }, "v1beta1")
		case 2:
			roundTripN(t, seed, 20, func() *karpv1beta1.NodeClaim { return &karpv1beta1.NodeClaim{} }, "v1")
		case 3:
			roundTripN(t, seed, 20, func() *karpv1.NodeClaim { return &karpv1.NodeClaim{} }, "v1beta1")
		case 4:
			roundTripN(t, seed, 20, func() *awsv1beta1.EC2NodeClass { return &awsv1beta1.EC2NodeClass{} }, "v1")
		case 5:
			roundTripN(t, seed, 20, func() *awsv1.EC2NodeClass { return &awsv1.EC2NodeClass{} }, "v1beta1")
		}
	})
}
