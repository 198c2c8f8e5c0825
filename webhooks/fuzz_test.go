package webhooks

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-policy/karpenter/api/install"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

// Hostile input reaches the webhooks as the body of an AdmissionReview or a
// ConversionReview: whatever the body, each answers within a bound with a well-formed
// response or a 400, and never panics (the handlers here do not recover panics, so a panic
// fails the fuzz run). `make test` runs each target for a few seconds, `make fuzz` longer;
// testdata/fuzz holds the seed corpora, and the samples seed them further.

// answerWithin bounds one request: the API server calls a webhook with a 10 s timeout.
const answerWithin = 10 * time.Second

// sampleObjects are the repository's sample and invalid manifests as JSON objects.
func sampleObjects(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	for _, glob := range []string{"../config/samples/*.yaml", "../test/testdata/invalid/*.yaml"} {
		files, err := filepath.Glob(glob)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			raw, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			for _, doc := range strings.Split(string(raw), "\n---") {
				if j, err := yaml.YAMLToJSON([]byte(doc)); err == nil && len(j) > 4 {
					out = append(out, j)
				}
			}
		}
	}
	return out
}

func serve(t *testing.T, h http.Handler, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
	case <-time.After(answerWithin):
		t.Fatalf("no answer within %s to a %d-byte body", answerWithin, len(body))
	}
	return rec
}

func FuzzAdmissionReview(f *testing.F) {
	hooks := Validating(install.NewScheme(), validation.New(), nil)
	hooks[CapacityBudgetGatePath] = &admission.Webhook{Handler: gateHook(f)}
	paths := make([]string, 0, len(hooks))
	for p, wh := range hooks {
		wh.WithRecoverPanic(false)
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for i, obj := range sampleObjects(f) {
		review := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: obj}}}
		review.APIVersion, review.Kind = "admission.k8s.io/v1", "AdmissionReview"
		body, _ := json.Marshal(review)
		f.Add(uint8(i), body)
	}
	f.Add(uint8(0), []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`))
	f.Add(uint8(1), []byte(`{"request":{"uid":"u","operation":"UPDATE","object":{"kind":"NodePool"},"oldObject":[]}}`))
	f.Add(uint8(2), []byte(strings.Repeat("[", 100000)))
	f.Add(uint8(0), []byte(`{"request":{"uid":"u","operation":"CREATE","namespace":"team-a","kind":{"version":"v1","kind":"Pod"},"object":{"spec":{"schedulingGates":[{}]}}}}`))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		rec := serve(t, hooks[paths[int(which)%len(paths)]], body)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("not an AdmissionReview response (%v): %s", err, rec.Body.String())
		}
		if !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Message == "") {
			t.Fatalf("a refusal without a reason: %s", rec.Body.String())
		}
	})
}

func FuzzConversionReview(f *testing.F) {
	h := &ConversionHandler{Converter: &conversion.Converter{DefaultNodeClass: conversion.KWOKNodeClass}}
	for _, obj := range sampleObjects(f) {
		for _, to := range []string{"karpenter.sh/v1", "karpenter.sh/v1beta1"} {
			review := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{UID: "u", DesiredAPIVersion: to,
				Objects: []runtime.RawExtension{{Raw: obj}}}}
			body, _ := json.Marshal(review)
			f.Add(body)
		}
	}
	f.Add([]byte(`{"request":{"uid":"u","desiredAPIVersion":"karpenter.sh/v9","objects":[{}]}}`))
	f.Add([]byte(`{"request":{"uid":"u","desiredAPIVersion":"/","objects":[null, 1, "x"]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := serve(t, h, body)
		switch rec.Code {
		case http.StatusBadRequest:
			if strings.TrimSpace(rec.Body.String()) == "" {
				t.Fatal("a 400 without a reason")
			}
		case http.StatusOK:
			var out apiextensionsv1.ConversionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("not a ConversionReview response (%v): %s", err, rec.Body.String())
			}
			if out.Response.Result.Status != "Success" && out.Response.Result.Message == "" {
				t.Fatalf("a failure without a reason: %s", rec.Body.String())
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
	})
}
