package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
)

// testRoot is the command tree, built once per test binary: the sim
// subtree's commands are package variables (newRootCmd).
var testRoot = sync.OnceValue(newRootCmd)

// TestCommandTree: main builds the whole tree, every command a user could
// reach before is reachable, each under its parent.
func TestCommandTree(t *testing.T) {
	var got []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			got = append(got, strings.TrimPrefix(sub.CommandPath(), "perflab "))
			walk(sub)
		}
	}
	walk(testRoot())
	want := []string{
		"bench", "doctor", "engine", "engine cleanup", "engine command", "engine gpus", "engine launch", "engine validate",
		"lab", "report", "report list", "runs", "serve",
		"sim", "sim calibrate", "sim fidelity", "sim image", "sim predict", "sim serve",
		"tokenize",
	}
	slices.Sort(got)
	for _, w := range want {
		if _, ok := slices.BinarySearch(got, w); !ok {
			t.Errorf("perflab %s: not in the tree (have %q)", w, got)
		}
	}
	if len(got) != len(slices.Compact(slices.Clone(got))) {
		t.Errorf("a command is registered twice: %q", got)
	}
	if testRoot().Version == "" {
		t.Error("root has no version")
	}
}

// TestNoInit: the tree is built in main from constructors, not by init
// functions adding to a global root (one of which found its parent by
// name): nothing in this package may run before main.
func TestNoInit(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
				t.Errorf("%s: func init: build the command in a constructor that newRootCmd calls", fset.Position(fd.Pos()))
			}
		}
	}
}
