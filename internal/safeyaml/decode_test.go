package safeyaml

import (
	"errors"
	"testing"
)

// The crasher the spec fuzzer found: goccy panics decoding it into a struct
// with a slice field. Unmarshal turns that into an error.
func TestUnmarshalRecoversDecoderPanic(t *testing.T) {
	var v struct {
		Name    string `yaml:"name"`
		Model   string `yaml:"model"`
		Engines []struct {
			Name string `yaml:"name"`
		} `yaml:"engines"`
		Generalization []struct {
			Name string `yaml:"name"`
		} `yaml:"generalization"`
	}
	// internal/lab/testdata/fuzz/FuzzParseSpec/fabc8e70fe6ef398, shortened.
	crasher := "name: 0\nmodel: 1\nengines:\n  - {name: vllm}\n  - {name: sglang}\n  - {name:trtllm}\ngeneralization:\n ! 00000000\n000008: #0000"
	err := Unmarshal([]byte(crasher), &v)
	if !errors.Is(err, ErrDecoderPanic) {
		t.Fatalf("err = %v, want ErrDecoderPanic", err)
	}
	v.Generalization = nil
	if err := Unmarshal([]byte("generalization:\n- name: a\n"), &v); err != nil || len(v.Generalization) != 1 {
		t.Errorf("a good document: err %v, %d items", err, len(v.Generalization))
	}
}
