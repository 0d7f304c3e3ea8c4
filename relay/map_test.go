package relay

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// A dialect package is the API's shapes alone (dialect/README.md): it
// imports the standard library, the chat dialect, wire and jsonscan, and
// nothing that serves, calls or stores.
func TestDialectsImportNoRole(t *testing.T) {
	const module = "github.com/relaydev/relay/relay/"
	allowed := map[string]bool{module + "dialect/chat": true, module + "wire": true, module + "jsonscan": true}
	files, err := filepath.Glob("dialect/*/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dialect sources: %v", err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			std := !strings.Contains(strings.Split(p, "/")[0], ".")
			if !std && !allowed[p] {
				t.Errorf("%s imports %s", path, p)
			}
		}
	}
}
