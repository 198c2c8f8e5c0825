package v1

import (
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestNillableDurationRoundTrip(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		wantNil bool
		want    time.Duration
	}{
		"never":           {in: `"Never"`, wantNil: true},
		"hours":           {in: `"720h"`, want: 720 * time.Hour},
		"mixed keeps raw": {in: `"1h30m"`, want: 90 * time.Minute},
		"zero":            {in: `"0s"`, want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			var d NillableDuration
			if err := json.Unmarshal([]byte(tc.in), &d); err != nil {
				t.Fatalf("unmarshal %s: %v", tc.in, err)
			}
			if (d.Duration == nil) != tc.wantNil {
				t.Fatalf("nil = %v, want %v", d.Duration == nil, tc.wantNil)
			}
			if !tc.wantNil && *d.Duration != tc.want {
				t.Fatalf("duration = %s, want %s", *d.Duration, tc.want)
			}
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.in {
				t.Fatalf("marshal = %s, want the original %s", out, tc.in)
			}
		})
	}
}

func TestNillableDurationRejectsGarbage(t *testing.T) {
	for _, in := range []string{`"30d"`, `"soon"`, `5`} {
		var d NillableDuration
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("unmarshal %s: expected an error", in)
		}
	}
}

func TestNillableDurationUnstructured(t *testing.T) {
	np := &NodePool{Spec: NodePoolSpec{Disruption: Disruption{ConsolidateAfter: MustParseNillableDuration("Never")}}}
	np.Spec.Template.Spec.ExpireAfter = NillableDuration{Duration: ptrDuration(2 * time.Hour)}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(np)
	if err != nil {
		t.Fatal(err)
	}
	spec := u["spec"].(map[string]any)
	if got := spec["disruption"].(map[string]any)["consolidateAfter"]; got != "Never" {
		t.Errorf("consolidateAfter = %#v, want \"Never\"", got)
	}
	if got := spec["template"].(map[string]any)["spec"].(map[string]any)["expireAfter"]; got != "2h0m0s" {
		t.Errorf("expireAfter = %#v, want \"2h0m0s\"", got)
	}
	back := &NodePool{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.Disruption.ConsolidateAfter.Duration != nil {
		t.Errorf("consolidateAfter read back as %v, want Never", back.Spec.Disruption.ConsolidateAfter)
	}
	if d := back.Spec.Template.Spec.ExpireAfter.Duration; d == nil || *d != 2*time.Hour {
		t.Errorf("expireAfter read back as %v, want 2h", back.Spec.Template.Spec.ExpireAfter)
	}
}

func ptrDuration(d time.Duration) *time.Duration { return &d }
