package test

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ExpectInvalid asserts that err is the API server's Invalid error (from its own validation
// or from a validating webhook), with a cause on field whose message contains message.
func ExpectInvalid(t testing.TB, err error, field, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected rejection on %s (%q), the object was accepted", field, message)
	}
	var status *apierrors.StatusError
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("expected an Invalid error on %s, got: %v", field, err)
	}
	if status.ErrStatus.Details == nil {
		t.Fatalf("rejection has no field details: %v", err)
	}
	var fields []string
	for _, c := range status.ErrStatus.Details.Causes {
		fields = append(fields, c.Field)
		if c.Field == field && strings.Contains(c.Message, message) {
			return
		}
	}
	t.Fatalf("expected a cause on field %q containing %q; got fields %v in: %v", field, message, fields, err)
}
