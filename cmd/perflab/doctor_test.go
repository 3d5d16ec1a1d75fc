package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/doctor"
)

// TestDoctorExitStatusAndJSON: on a host without nvidia-smi or a Docker
// socket (PATH and DOCKER_HOST point at nothing), `perflab doctor` prints
// every check, as JSON with -o json, and fails, so a script can gate on
// its exit status; the simulator's runtime passes.
func TestDoctorExitStatusAndJSON(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(empty, "none.sock"))
	t.Setenv("HF_HOME", empty)

	var out bytes.Buffer
	cmd := newDoctorCmd()
	// As under the root command, which silences cobra's usage text.
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--runtime", "docker", "-o", "json"})
	err := cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("err %v, want the failed checks counted", err)
	}
	var rep doctor.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out.String())
	}
	got := map[string]doctor.Status{}
	for _, c := range rep.Checks {
		got[c.Name] = c.Status
	}
	if got["gpu"] != doctor.Error || got["docker"] != doctor.Error || rep.Runtime != "docker" {
		t.Errorf("report %+v, want gpu and docker errors", rep)
	}

	out.Reset()
	cmd = newDoctorCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--runtime", "sim"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Errorf("--runtime sim: %v", err)
	}
	if !strings.HasPrefix(out.String(), "ok") {
		t.Errorf("--runtime sim printed %q", out.String())
	}

	cmd = newDoctorCmd()
	cmd.SetArgs([]string{"-o", "yaml"})
	if err := cmd.ExecuteContext(context.Background()); err == nil {
		t.Error("-o yaml accepted")
	}
}
