package clip

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The module's code shortens text only through this package: no other file
// of the module appends an ellipsis to a cut string. (fork's short run ids,
// "8f3a2c…", are an id's fixed abbreviation, not a cut of long text.)
func TestNoOtherShortener(t *testing.T) {
	root := filepath.Join("..", "..")
	cut := regexp.MustCompile(`\+ "…"|"…" \+|\+ Ellipsis`)
	allowed := map[string]bool{filepath.Join("fork", "explain.go"): true}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			if d.Name() == "testdata" || rel == filepath.Join("internal", "clip") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || allowed[rel] {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if cut.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d cuts text itself; use clip.Head or clip.Diff: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
