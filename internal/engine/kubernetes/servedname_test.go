package kubernetes

import (
	"testing"
	"time"

	"github.com/perflab/perflab/internal/engine"
)

// TestReadyTRTLLMModelDirInPVC: a TensorRT-LLM model given as a directory
// of the pod's Hugging Face cache volume (a PVC here; a node's hostPath is
// the same to the pod) is not on perflab's host. trtllm-serve lists the
// directory's name (tensorrt_llm/serve/openai_server.py), so readiness
// must wait for that name, not for the path perflab was given.
func TestReadyTRTLLMModelDirInPVC(t *testing.T) {
	for _, rt := range []struct {
		name         string
		pvc, hostDir string
	}{{"pvc", "models", ""}, {"hostPath", "", "/srv/hf"}} {
		t.Run(rt.name, func(t *testing.T) {
			k := newKube(t)
			k.rt.HFCachePVC, k.rt.HFCacheHostPath = rt.pvc, rt.hostDir
			cfg := engine.Config{Engine: engine.TRTLLM, Model: hfHomeInPod + "/local/Qwen3-14B"}
			k.rt.Port = server(t, "Qwen3-14B") // what the server in the pod lists
			h := k.start(engine.Launch{Config: cfg, ReadyTimeout: 3 * time.Second})
			k.status(h.PodName(), running("127.0.0.1"))
			if f := ready(t, h, 10*time.Second); f != nil {
				t.Fatalf("Ready: %+v (waited for %q)", f, cfg.ServedName())
			}
		})
	}
}
