package settings

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEncodings: the flags the engine package starts sim serve with and the
// environment a container of the simulated image gets are one type's two
// encodings; reading the environment back gives the same flags, so the
// sim runtime and the simulated image cannot drift apart.
func TestEncodings(t *testing.T) {
	s := Settings{GPU: "H200", GPUs: 2, TimeScale: 20, StartupDelay: 2 * time.Second,
		Tokenizer: "/tok", ModelConfig: "/cfg.json", Coefficients: "/c.json", NoFaults: true}
	want := []string{"--gpu", "H200", "--gpus", "2", "--time-scale", "20", "--startup-delay", "2s",
		"--tokenizer", "/tok", "--model-config", "/cfg.json", "--coefficients", "/c.json", "--no-faults"}
	if got := s.Args(); !slices.Equal(got, want) {
		t.Errorf("Args = %q\nwant   %q", got, want)
	}
	env := s.Env()
	back, err := FromEnv(func(k string) string { return env[k] })
	if err != nil || !reflect.DeepEqual(back, s) {
		t.Errorf("FromEnv(Env) = %+v, %v; want %+v", back, err, s)
	}
	// Zero settings: the engine package's labs start servers at once
	// ("0s"); an image given nothing gets its defaults.
	if got := (Settings{GPU: "H100"}).Args(); !slices.Equal(got, []string{"--gpu", "H100", "--startup-delay", "0s"}) {
		t.Errorf("zero Args = %q", got)
	}
	if env := (Settings{}).Env(); len(env) != 0 {
		t.Errorf("zero Env = %v", env)
	}
	def, err := FromEnv(func(string) string { return "" })
	if err != nil || def.GPU != DefaultGPU || def.StartupDelay != DefaultStartupDelay || len(def.Args()) != 2 {
		t.Errorf("empty environment: %+v %v, args %q", def, err, def.Args())
	}
}

func TestFromEnvRejects(t *testing.T) {
	for env, v := range map[string]string{EnvGPUs: "two", EnvTimeScale: "fast", EnvStartupDelay: "5"} {
		_, err := FromEnv(func(k string) string {
			if k == env {
				return v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), env) || !strings.Contains(err.Error(), v) {
			t.Errorf("%s=%q: err %v, want one naming the variable and value", env, v, err)
		}
	}
}

func TestContainerMounts(t *testing.T) {
	env, vols := Settings{GPU: "H100", Tokenizer: "/host/tokenizer.json", Coefficients: "/host/c.json"}.Container()
	if env[EnvTokenizer] != "/perflab/sim/tokenizer.json" || env[EnvCoefficients] != "/perflab/sim/coefficients.json" || env[EnvGPU] != "H100" {
		t.Errorf("env %v", env)
	}
	if !slices.Equal(vols, []string{"/host/tokenizer.json:/perflab/sim/tokenizer.json:ro", "/host/c.json:/perflab/sim/coefficients.json:ro"}) {
		t.Errorf("volumes %v", vols)
	}
}
