// Package testbin gives tests the perflab binary and the simulated engine
// image without each test binary building its own.
//
// CI builds perflab once and names it in PERFLAB_BIN, and builds the
// simulated engine image once from it and names it in PERFLAB_SIM_IMAGE
// (.ci/run); about eight test binaries used to run `go build` each, and
// three built the image. When the variables are unset, as under a plain
// `go test`, the binary is built here once per test binary, so a package's
// tests still run alone.
package testbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// EnvBin names a perflab binary the tests use instead of building one.
const EnvBin = "PERFLAB_BIN"

// EnvSimImage names a simulated engine image (perflab sim image) the tests
// use instead of building one; they never remove it.
const EnvSimImage = "PERFLAB_SIM_IMAGE"

var (
	once     sync.Once
	bin      string
	buildDir string
	buildErr error
)

// Perflab returns the path of a perflab binary: PERFLAB_BIN when set (it
// must be an executable file), else one built from this module's
// cmd/perflab into a temporary directory, once per test binary. Call
// Cleanup from TestMain to remove what was built.
func Perflab() (string, error) {
	once.Do(func() {
		if p := os.Getenv(EnvBin); p != "" {
			bin, buildErr = given(p)
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "perflab-testbin-")
		if buildErr != nil {
			buildErr = fmt.Errorf("testbin: %w", buildErr)
			return
		}
		bin = filepath.Join(buildDir, "perflab")
		// By import path, so it builds from any package's directory.
		out, err := exec.Command("go", "build", "-o", bin, "github.com/perflab/perflab/cmd/perflab").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("testbin: go build cmd/perflab: %w\n%s", err, out)
		}
	})
	return bin, buildErr
}

// given checks that p, from PERFLAB_BIN, is an executable file, and makes
// it absolute: tests run the binary from other working directories.
func given(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("testbin: %s=%q: %w", EnvBin, p, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("testbin: %s=%q: %w", EnvBin, p, err)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("testbin: %s=%q: %w", EnvBin, p, errNotExecutable)
	}
	return abs, nil
}

var errNotExecutable = errors.New("not an executable file")

// SimImage returns the simulated engine image named by PERFLAB_SIM_IMAGE,
// or "" when it is unset and the caller builds its own.
func SimImage() string { return os.Getenv(EnvSimImage) }

// Cleanup removes the binary Perflab built, if it built one; a binary from
// PERFLAB_BIN is left alone.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}
