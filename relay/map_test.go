package relay

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The map in doc.go lists every package of the repository, and only those.
func TestTheMapListsEveryPackage(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for line := range strings.SplitSeq(string(src), "\n") {
		// A line of the map: "//\t<package>  <what it owns>".
		if rest, ok := strings.CutPrefix(line, "//\t"); ok {
			if f := strings.Fields(rest); len(f) > 1 {
				listed = append(listed, f[0])
			}
		}
	}
	found := map[string]bool{}
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(path, ".go"):
			dir, err := filepath.Rel("..", filepath.Dir(path))
			if err != nil {
				return err
			}
			found[filepath.ToSlash(dir)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(found, "relay") // the map itself
	for _, p := range listed {
		if !found[p] {
			t.Errorf("the map lists %s, which is no package", p)
		}
		delete(found, p)
	}
	for _, p := range slices.Sorted(maps.Keys(found)) {
		t.Errorf("package %s is missing from the map in doc.go", p)
	}
}
