package v1

import (
	"bytes"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
)

// Decode reads the configuration into the kubelet's own type, refusing a field the kubelet
// does not have and a value of the wrong type; an empty configuration decodes to a zero value.
// With only unknown or duplicate fields wrong, it returns the error and the rest decoded, so
// that a caller can report every problem at once; with a wrong type, no configuration.
// The webhook uses it to validate, and launch paths to read the settings Karpenter computes
// with (maxPods, kubeReserved, systemReserved, evictionHard).
func (kc KubeletConfiguration) Decode() (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	out := &kubeletconfigv1beta1.KubeletConfiguration{}
	if len(kc) == 0 {
		return out, nil
	}
	raw, err := json.Marshal(kc)
	if err != nil {
		return nil, err
	}
	strict, err := sigsjson.UnmarshalStrict(raw, out, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		var b bytes.Buffer
		for i, e := range strict {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(e.Error())
		}
		return out, fmt.Errorf("%s", b.String())
	}
	return out, nil
}

// JSONValue is one kubelet setting written as JSON, e.g. JSONValue(`110`) for maxPods; for
// building configurations in Go.
func JSONValue(raw string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(raw)} }
