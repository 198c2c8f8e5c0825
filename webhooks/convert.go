package webhooks

import (
	"encoding/json"
	"fmt"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-policy/karpenter/webhooks/conversion"
)

// maxReviewBytes bounds a ConversionReview request body (the API server sends at most a list
// page of objects; 16 MiB leaves room for large ones).
const maxReviewBytes = 16 << 20

// ConversionHandler serves the CRDs' conversion webhook (ConversionReview v1). It converts
// each object as JSON with conversion.Converter.Unstructured, not through controller-runtime's
// typed round trip, so that the text of every duration and quantity survives: a client
// reading at the other version sees what was written, and writing it back stores it again.
type ConversionHandler struct {
	Converter *conversion.Converter
}

// ServeHTTP implements http.Handler.
func (h *ConversionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxReviewBytes)).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("reading the ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	review.Response = h.convert(r, review.Request)
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&review); err != nil {
		log.FromContext(r.Context()).Error(err, "writing the ConversionReview response")
	}
}

func (h *ConversionHandler) convert(r *http.Request, req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	fail := func(err error) *apiextensionsv1.ConversionResponse {
		resp.ConvertedObjects = nil
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
		return resp
	}
	gv, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil {
		return fail(fmt.Errorf("desiredAPIVersion %q: %w", req.DesiredAPIVersion, err))
	}
	for i, raw := range req.Objects {
		var src map[string]any
		if err := utiljson.Unmarshal(raw.Raw, &src); err != nil {
			return fail(fmt.Errorf("object %d: %w", i, err))
		}
		out, err := h.Converter.Unstructured(r.Context(), src, gv.Version)
		if err != nil {
			return fail(fmt.Errorf("object %d: %w", i, err))
		}
		b, err := json.Marshal(out)
		if err != nil {
			return fail(fmt.Errorf("object %d: %w", i, err))
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}
