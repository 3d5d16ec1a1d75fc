package labspec

// smallSpec is a small valid spec, the fuzzer's seed (lab_test.go has the
// same one, the lab's tests' spec).
const smallSpec = `
name: small
model: Qwen/Qwen3-14B
fp8_model: Qwen/Qwen3-14B-FP8
hardware: {gpu: H100, count: 1}
engines:
  - {name: vllm, version: 0.11.0}
  - {name: sglang, version: 0.5.5.post1}
  - {name: trtllm, version: 1.2.0rc1}
tuning: {name: rnd, dataset: random, input_len: 512, output_len: 128, num_prompts: 200, seed: 42}
generalization:
  - {name: short, dataset: random, input_len: 128, output_len: 4, num_prompts: 100, seed: 42}
stages:
  - name: engine
  - name: quantization
    values: [fp8-checkpoint]
  - name: attention_backend
    per_engine: {vllm: [FLASHINFER], sglang: [fa3, flashinfer, triton], trtllm: [FLASHINFER]}
  - name: max_num_seqs
    values: ["512", "1024"]
  - name: speculative
    values: ["mtp:4"]
search:
  knobs: [engine, quantization, max_num_seqs, max_num_batched_tokens, chunked_prefill]
repeats: 3
`
