package v1

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Never is the value of a NillableDuration that never elapses.
const Never = "Never"

// NillableDuration is a duration that may also be "Never" (a nil Duration). It keeps the
// text it was read from, so that it is written back in the same form.
//
// +kubebuilder:validation:Type=string
type NillableDuration struct {
	*time.Duration `json:"-"`

	// Raw is the original JSON text, so that the value re-marshals as it was written.
	Raw []byte `json:"-" hash:"ignore"`
}

// MustParseNillableDuration parses "Never" or a Go duration and panics on error; for tests
// and constants.
func MustParseNillableDuration(s string) NillableDuration {
	var d NillableDuration
	if err := d.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
		panic(err)
	}
	return d
}

// UnmarshalJSON reads "Never" as nil and any other string as a Go duration.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string: %w", err)
	}
	d.Raw = slices.Clone(b)
	if s == Never {
		d.Duration = nil
		return nil
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parsing duration %q: %w", s, err)
	}
	d.Duration = &parsed
	return nil
}

// MarshalJSON writes the original text when there is one, "Never" for nil, or the duration.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	if d.Raw != nil {
		return d.Raw, nil
	}
	if d.Duration == nil {
		return json.Marshal(Never)
	}
	return json.Marshal(d.Duration.String())
}

// ToUnstructured lets the unstructured converter write the same text as MarshalJSON.
func (d NillableDuration) ToUnstructured() interface{} {
	if d.Raw != nil {
		var s string
		if err := json.Unmarshal(d.Raw, &s); err == nil {
			return s
		}
	}
	if d.Duration == nil {
		return Never
	}
	return d.Duration.String()
}

// String is the duration's text, or "Never".
func (d NillableDuration) String() string {
	if s, ok := d.ToUnstructured().(string); ok {
		return s
	}
	return ""
}
