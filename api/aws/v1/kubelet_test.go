package v1

import (
	"strings"
	"testing"
)

func TestKubeletDecode(t *testing.T) {
	for name, tc := range map[string]struct {
		kc   KubeletConfiguration
		want string // a substring of the error; empty means it decodes
	}{
		"empty":                     {kc: nil},
		"known fields":              {kc: KubeletConfiguration{"maxPods": {Raw: []byte("110")}, "serializeImagePulls": {Raw: []byte("false")}}},
		"nested logging":            {kc: KubeletConfiguration{"logging": {Raw: []byte(`{"format":"json","flushFrequency":"5s","options":{"json":{"infoBufferSize":"100Mi"}}}`)}}},
		"a field the kubelet lacks": {kc: KubeletConfiguration{"maxPodz": {Raw: []byte("110")}}, want: `unknown field "maxPodz"`},
		"a wrong type":              {kc: KubeletConfiguration{"podsPerCore": {Raw: []byte(`"ten"`)}}, want: "podsPerCore"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := tc.kc.Decode()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want decoded, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			case tc.want == "" && name == "known fields" && cfg.MaxPods != 110:
				t.Fatalf("maxPods = %d, want 110", cfg.MaxPods)
			}
		})
	}
}
