package report

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// TestSummaryKeepsEveryStoredField: the summary a lab stored (the 14B
// example's, as main wrote it before the report owned the type, and a
// max_load_under_slo one) decodes into Summary and encodes back with no key
// lost or changed: the lab fills this type and the report reads it, so a
// field one side drops would show here.
func TestSummaryKeepsEveryStoredField(t *testing.T) {
	example, err := os.ReadFile("testdata/summary-14b.json")
	if err != nil {
		t.Fatal(err)
	}
	load := []byte(`{"version":1,"name":"slo","model":"m","runtime":"sim-predict","objective":"max_load_under_slo","unit":"req/s","gpu":"H100","gpus":1,` +
		`"engines":[{"name":"vllm","version":"0.17.1"}],"tuning_workload":"w","workloads":[{"name":"w","description":"d","perflab_command":"p","vllm_command":"v"}],` +
		`"repeats":1,"min_success_rate":1,"noise_floor":0,"baseline":{"name":"vLLM","point":{"engine":"vllm"},"config_hash":"abc","trial_key":"k","gpus":1,"score":2.5,` +
		`"gain":0,"total_throughput":100,"mean_tpot_ms":10,"p99_tpot_ms":20,"success_rate":1,"decision":"baseline","why":"failed","failure_class":"oom"},` +
		`"stages":null,"staged":null,"winner":null,"gain":0,"tuning_trials":1,"trials_run":1,"trials_reused":0,"engine_starts":0,"gpu_hours":0,` +
		`"load":{"slo":"tpot_p99<=50ms","axis":"rate","tolerance":0.05,"start":1,"max":64,"warmup_prompts":10},` +
		`"load_searches":[{"key":"k","name":"vLLM","result":null}]}`)
	for name, stored := range map[string][]byte{"14b example": example, "load": load} {
		var s Summary
		if err := json.Unmarshal(stored, &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, err := json.Marshal(&s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var a, b any
		if err := json.Unmarshal(stored, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(again, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: summary changed in a round trip:\nstored %.400s\nagain  %.400s", name, stored, again)
		}
		if name == "14b example" && !bytes.Equal(stored, again) {
			t.Errorf("%s: not byte-identical after a round trip", name)
		}
	}
}
