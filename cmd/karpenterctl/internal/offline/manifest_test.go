package offline

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// manyPods is a file of n small documents, enough for Parse to spread them over workers.
func manyPods(n int) []string {
	docs := make([]string, n)
	for i := range docs {
		docs[i] = fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p%d\n  labels:\n    enabled: yes\n", i)
	}
	return docs
}

func TestParseKeepsEveryDocumentInOrder(t *testing.T) {
	docs := manyPods(200)
	file := []byte("# leading comment\n" + strings.Join(docs, "---\n") + "--- # trailing\n")
	got, err := Parse("w.yaml", file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Join(got), file) {
		t.Fatal("Join(Parse(file)) is not the file")
	}
	var names []string
	for _, d := range got {
		if d.Object != nil {
			names = append(names, d.Name())
		}
	}
	if len(names) != 200 {
		t.Fatalf("%d objects, want 200", len(names))
	}
	for i, n := range names {
		if n != fmt.Sprintf("p%d", i) {
			t.Fatalf("object %d is %s", i, n)
		}
	}
	// The second document starts after the first's six lines, its comment and its separator.
	if got[1].Line != 9 {
		t.Errorf("second document on line %d, want 9", got[1].Line)
	}
	// As kubectl reads YAML: an unquoted yes in a label value is YAML 1.1's boolean.
	if v := got[0].Object["metadata"].(map[string]any)["labels"].(map[string]any)["enabled"]; v != true {
		t.Errorf("labels.enabled = %#v, want the boolean true", v)
	}
}

func TestParseReportsTheFirstBadDocument(t *testing.T) {
	docs := manyPods(300)
	docs[120] = "kind: Pod\nmetadata: {name: [\n"
	docs[250] = "kind: Pod\nspec: : :\n"
	file := []byte(strings.Join(docs, "---\n"))
	line := 1
	for _, d := range docs[:120] {
		line += strings.Count(d, "\n") + 1
	}
	for range 5 { // the workers' order differs run to run; the answer must not
		_, err := Parse("w.yaml", file)
		var re *ReadError
		if !errors.As(err, &re) {
			t.Fatalf("error %v, want a ReadError", err)
		}
		if re.File != "w.yaml" || re.Line < line || re.Line > line+2 {
			t.Fatalf("error at %s:%d, want the document on line %d: %v", re.File, re.Line, line, err)
		}
	}
}

func TestParseReportsABadDocumentBeforeAnOversizedOne(t *testing.T) {
	docs := manyPods(50)
	docs[10] = "kind: Pod\nmetadata: {name: [\n"
	docs[40] = "kind: ConfigMap\ndata:\n  big: " + strings.Repeat("x", MaxDocumentBytes) + "\n"
	_, err := Parse("w.yaml", []byte(strings.Join(docs, "---\n")))
	if err == nil || !strings.Contains(err.Error(), "not valid YAML") {
		t.Fatalf("error %v, want the invalid YAML of document 11", err)
	}
	docs[10] = manyPods(1)[0]
	_, err = Parse("w.yaml", []byte(strings.Join(docs, "---\n")))
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("error %v, want the oversized document", err)
	}
}

// A key given twice in a mapping is refused with its line, as kubectl's strict decoding
// refuses it; the same key in different mappings is fine.
func TestParseRefusesDuplicateKeys(t *testing.T) {
	for name, tc := range map[string]struct {
		text string
		line int
	}{
		"at the top":         {text: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nkind: Pod\n", line: 4},
		"nested":             {text: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels:\n    x: \"1\"\n    x: \"2\"\n", line: 7},
		"in a list":          {text: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n    image: i\n    name: d\n", line: 8},
		"none: two mappings": {text: "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {name: b}}\n"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte("# a comment\n"+tc.text))
			if tc.line == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var re *ReadError
			if !errors.As(err, &re) || re.Line != tc.line+1 || !strings.Contains(err.Error(), "given twice") {
				t.Fatalf("error %v, want one at line %d", err, tc.line+1)
			}
		})
	}
}
