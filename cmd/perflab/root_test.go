package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

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
	walk(newRootCmd())
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
	if newRootCmd().Version == "" {
		t.Error("root has no version")
	}
}

// TestTreeBuildsTwice: every command, the sim subtree's included, is
// built by its constructor, so two trees share no command and no flag's
// variable: a test may build its own, and flags parsed in one tree leave
// the other's defaults alone.
func TestTreeBuildsTwice(t *testing.T) {
	a, b := newRootCmd(), newRootCmd()
	var walk func(x, y *cobra.Command)
	walk = func(x, y *cobra.Command) {
		if x == y {
			t.Errorf("perflab %s: the same command in both trees", x.CommandPath())
		}
		x.Flags().VisitAll(func(f *pflag.Flag) {
			if g := y.Flags().Lookup(f.Name); g != nil && g.Value == f.Value {
				t.Errorf("perflab %s --%s: both trees set the same variable", x.CommandPath(), f.Name)
			}
		})
		xs, ys := x.Commands(), y.Commands()
		if len(xs) != len(ys) {
			t.Fatalf("perflab %s: %d subcommands, then %d", x.CommandPath(), len(xs), len(ys))
		}
		for i := range xs {
			walk(xs[i], ys[i])
		}
	}
	walk(a, b)
	serveA, _, err := a.Find([]string{"sim", "serve"})
	if err != nil {
		t.Fatal(err)
	}
	if err := serveA.ParseFlags([]string{"--engine", "sglang"}); err != nil {
		t.Fatal(err)
	}
	serveB, _, _ := b.Find([]string{"sim", "serve"})
	if got := serveB.Flags().Lookup("engine").Value.String(); got != "vllm" {
		t.Errorf("the second tree's sim serve --engine = %q after the first parsed sglang, want vllm", got)
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
