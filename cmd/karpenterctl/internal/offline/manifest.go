package offline

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// Document is one YAML document of a manifest file, with what is needed to point at its lines
// and to write it back unchanged.
type Document struct {
	File string
	// Line is the line of the file the document starts on (1-based).
	Line int
	// Sep is the --- line before the document, as written (nil for a file's first document
	// when the file does not start with one); Sep and Raw of every document, in order, give
	// the file back byte for byte.
	Sep []byte
	// Raw is the document's text as read, without the --- separator.
	Raw []byte
	// Object is the document as JSON-like data, nil for an empty document.
	Object map[string]any

	node *yamlv3.Node
}

// GVK is the document's apiVersion and kind.
func (d *Document) GVK() schema.GroupVersionKind {
	apiVersion, _ := d.Object["apiVersion"].(string)
	kind, _ := d.Object["kind"].(string)
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.WithKind(kind)
}

// Name is the document's metadata.name.
func (d *Document) Name() string {
	name, _, _ := nestedString(d.Object, "metadata", "name")
	return name
}

// ReadError is input that cannot be read: a missing file or YAML that does not parse.
type ReadError struct {
	File string
	Line int
	Err  error
}

func (e *ReadError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

// ReadPaths reads files, directories (recursively, *.yaml, *.yml and *.json, in name order)
// and "-" for standard input. Under a directory, hidden directories (.git, .github) and Helm
// charts (a directory holding Chart.yaml, whose templates are manifests only once rendered)
// are skipped; see Skipped.
func ReadPaths(paths []string, stdin io.Reader) ([]Document, error) {
	var docs []Document
	for _, p := range paths {
		if p == "-" {
			b, err := io.ReadAll(io.LimitReader(stdin, MaxFileBytes+1))
			if err != nil {
				return nil, &ReadError{File: "<stdin>", Err: err}
			}
			d, err := Parse("<stdin>", b)
			if err != nil {
				return nil, err
			}
			docs = append(docs, d...)
			continue
		}
		files, err := manifestFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if info, err := os.Stat(f); err == nil && info.Size() > MaxFileBytes {
				return nil, &ReadError{File: f, Err: fmt.Errorf("%d bytes: larger than the %d MiB a manifest file may be", info.Size(), MaxFileBytes>>20)}
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, &ReadError{File: f, Err: err}
			}
			d, err := Parse(f, b)
			if err != nil {
				return nil, err
			}
			docs = append(docs, d...)
		}
	}
	return docs, nil
}

func manifestFiles(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, &ReadError{File: p, Err: err}
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != p {
			if strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "Chart.yaml")); err == nil {
				return filepath.SkipDir
			}
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, &ReadError{File: p, Err: err}
	}
	sort.Strings(files)
	return files, nil
}

// Skipped reports which of names (slash-separated paths of files under root, as Git lists
// them; root "" or "." for all) a directory walk of ReadPaths from root leaves out: those
// under a hidden directory or a directory holding a Chart.yaml, below root.
func Skipped(root string, names []string) map[string]bool {
	root = pathpkg.Clean("/" + root)[1:]
	if root == "" {
		root = "."
	}
	charts := map[string]bool{}
	for _, n := range names {
		if pathpkg.Base(n) == "Chart.yaml" {
			charts[pathpkg.Dir(n)] = true
		}
	}
	out := map[string]bool{}
	for _, n := range names {
		dir := pathpkg.Dir(n)
		for dir != root && dir != "." && dir != "/" {
			if charts[dir] || strings.HasPrefix(pathpkg.Base(dir), ".") {
				out[n] = true
				break
			}
			dir = pathpkg.Dir(dir)
		}
	}
	return out
}

var separator = regexp.MustCompile(`^---(\s.*)?$`)

// Bounds on what is read, so that hostile input gets an error rather than the machine's
// memory: a file (or standard input) of at most MaxFileBytes, and documents of at most
// MaxDocumentBytes, the API server's own limit on a request body. YAML aliases that expand
// too far and nesting deeper than 10 000 are refused by the YAML parser itself.
const (
	MaxFileBytes     = 64 << 20
	MaxDocumentBytes = 3 << 20
)

// Parse splits a file into its YAML documents and parses each. Documents are parsed on
// every core (a workload of thousands of pods is thousands of documents); the result, and the
// error reported when several documents are bad (the first in the file), do not depend on it.
func Parse(file string, b []byte) ([]Document, error) {
	if len(b) > MaxFileBytes {
		return nil, &ReadError{File: file, Err: fmt.Errorf("larger than the %d MiB a manifest file may be", MaxFileBytes>>20)}
	}
	var docs []Document
	lines := bytes.SplitAfter(b, []byte("\n"))
	start, startLine := 0, 1
	var sep []byte
	flush := func(end int) error {
		raw := bytes.Join(lines[start:end], nil)
		if len(raw) > MaxDocumentBytes {
			return &ReadError{File: file, Line: startLine, Err: fmt.Errorf("a document of %d bytes: larger than the %d MiB the API server accepts", len(raw), MaxDocumentBytes>>20)}
		}
		if len(raw) > 0 || sep != nil {
			docs = append(docs, Document{File: file, Line: startLine, Sep: sep, Raw: raw})
		}
		return nil
	}
	var tooBig error
	for i, l := range lines {
		if separator.Match(bytes.TrimRight(l, "\r\n")) {
			if tooBig = flush(i); tooBig != nil {
				break
			}
			start, startLine, sep = i+1, i+2, l
		}
	}
	if tooBig == nil {
		tooBig = flush(len(lines))
	}
	// A bad document before an oversized one is the first error in the file.
	if err := parseAll(docs); err != nil {
		return nil, err
	}
	if tooBig != nil {
		return nil, tooBig
	}
	return docs, nil
}

// parseAll parses every non-blank document in place, spread over GOMAXPROCS workers, and
// returns the error of the first bad document in file order.
func parseAll(docs []Document) error {
	errs := make([]error, len(docs))
	parse := func(i int) {
		d := &docs[i]
		if len(bytes.TrimSpace(d.Raw)) == 0 {
			return
		}
		parsed, err := parseDocument(d.File, d.Line, d.Raw)
		if err != nil {
			errs[i] = err
			return
		}
		parsed.Sep = d.Sep
		*d = parsed
	}
	workers := min(runtime.GOMAXPROCS(0), len(docs)/16)
	if workers <= 1 {
		for i := range docs {
			if parse(i); errs[i] != nil {
				return errs[i]
			}
		}
		return nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(docs) {
					return
				}
				parse(i)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Join writes documents back as one file.
func Join(docs []Document) []byte {
	var out bytes.Buffer
	for _, d := range docs {
		out.Write(d.Sep)
		out.Write(d.Raw)
	}
	return out.Bytes()
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

func parseDocument(file string, line int, raw []byte) (Document, error) {
	d := Document{File: file, Line: line, Raw: raw}
	var node yamlv3.Node
	if err := yamlv3.Unmarshal(raw, &node); err != nil {
		errLine := line
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			errLine = line + n - 1
		}
		return d, &ReadError{File: file, Line: errLine, Err: fmt.Errorf("not valid YAML: %w", err)}
	}
	if len(node.Content) == 0 {
		return d, nil
	}
	d.node = node.Content[0]
	// A key given twice in one mapping: kubectl's strict decoding refuses it, and the object
	// would otherwise silently keep the last value.
	if key, at := duplicateKey(d.node); key != "" {
		return d, &ReadError{File: file, Line: line + at - 1, Err: fmt.Errorf("not valid YAML: mapping key %q given twice", key)}
	}
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return d, &ReadError{File: file, Line: line, Err: err}
	}
	var obj any
	if err := utiljson.Unmarshal(j, &obj); err != nil {
		return d, &ReadError{File: file, Line: line, Err: err}
	}
	m, ok := obj.(map[string]any)
	if !ok {
		return d, &ReadError{File: file, Line: line, Err: fmt.Errorf("a manifest document must be a mapping, found %T", obj)}
	}
	d.Object = m
	return d, nil
}

// duplicateKey finds a mapping key given twice anywhere under n, with the line (within the
// document) of its second use; "" when there is none.
func duplicateKey(n *yamlv3.Node) (string, int) {
	switch n.Kind {
	case yamlv3.MappingNode:
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yamlv3.ScalarNode && k.Tag != "!!merge" {
				if seen[k.Value] {
					return k.Value, k.Line
				}
				seen[k.Value] = true
			}
			if key, at := duplicateKey(n.Content[i+1]); key != "" {
				return key, at
			}
		}
	case yamlv3.SequenceNode, yamlv3.DocumentNode:
		for _, c := range n.Content {
			if key, at := duplicateKey(c); key != "" {
				return key, at
			}
		}
	}
	return "", 0
}

// LineOf returns the file line of a field path such as spec.template.spec.requirements[0].key,
// or of the nearest enclosing field that the document has.
func (d *Document) LineOf(path string) int {
	n := d.node
	if n == nil {
		return d.Line
	}
	line := n.Line
	for _, tok := range splitPath(path) {
		at, next := child(n, tok)
		if next == nil {
			break
		}
		n, line = next, at
	}
	return d.Line + line - 1
}

// BlockScalarLine returns the file line of line n (1-based) inside the block scalar at path,
// e.g. a line of a CapacityPolicy's Rego; ok is false when the field is not a block scalar.
func (d *Document) BlockScalarLine(path string, n int) (int, bool) {
	node := d.node
	for _, tok := range splitPath(path) {
		if _, node = child(node, tok); node == nil {
			return 0, false
		}
	}
	if node.Kind != yamlv3.ScalarNode || (node.Style != yamlv3.LiteralStyle && node.Style != yamlv3.FoldedStyle) {
		return 0, false
	}
	// yaml.v3 places a block scalar at its indicator (|); the content starts on the next line.
	return d.Line + node.Line - 1 + n, true
}

// child returns the line to report for tok (the key's line in a mapping, the item's in a
// sequence) and the node to keep walking in.
func child(n *yamlv3.Node, tok string) (int, *yamlv3.Node) {
	if n == nil {
		return 0, nil
	}
	switch n.Kind {
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == tok {
				return n.Content[i].Line, n.Content[i+1]
			}
		}
	case yamlv3.SequenceNode:
		if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i].Line, n.Content[i]
		}
	}
	return 0, nil
}

// splitPath splits a field path into names, indices and map keys.
func splitPath(p string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '.':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		case '[':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return append(out, p[i+1:])
			}
			out = append(out, p[i+1:i+end])
			i += end
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
