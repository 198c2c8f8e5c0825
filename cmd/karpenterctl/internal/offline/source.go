package offline

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// ReadSource reads manifests from a file, a directory, - (standard input), or git:REF[:DIR]:
// the manifests under DIR (a path from the working directory; all of them without it) at REF
// of the working directory's Git repository, leaving out what a directory walk leaves out.
func ReadSource(spec string, stdin io.Reader) ([]Document, error) {
	rest, ok := strings.CutPrefix(spec, "git:")
	if !ok {
		return ReadPaths([]string{spec}, stdin)
	}
	ref, dir, _ := strings.Cut(rest, ":")
	if ref == "" {
		return nil, fmt.Errorf("%s: no Git ref (want git:REF[:DIR])", spec)
	}
	git := func(args ...string) ([]byte, error) {
		var out, errOut bytes.Buffer
		cmd := exec.Command("git", args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: git %s: %v: %s", spec, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
		}
		return out.Bytes(), nil
	}
	if _, err := git("rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
		return nil, fmt.Errorf("%s: %q is not a commit of this repository", spec, ref)
	}
	args := []string{"ls-tree", "-r", "-z", "--full-name", "--name-only", ref}
	if dir != "" {
		args = append(args, "--", dir)
	}
	list, err := git(args...)
	if err != nil {
		return nil, err
	}
	var docs []Document
	names := strings.Split(strings.TrimRight(string(list), "\x00"), "\x00")
	// Git lists full paths; DIR is relative to the working directory.
	prefix, err := git("rev-parse", "--show-prefix")
	if err != nil {
		return nil, err
	}
	skipped := Skipped(path.Join(strings.TrimSpace(string(prefix)), dir), names)
	for _, name := range names {
		if skipped[name] {
			continue // as a directory walk skips it (ReadPaths)
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		blob, err := git("cat-file", "blob", ref+":"+name)
		if err != nil {
			return nil, err
		}
		d, err := Parse(ref+":"+name, blob)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	return docs, nil
}
