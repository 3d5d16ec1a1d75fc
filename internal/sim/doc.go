// Package sim is a calibrated simulator of vLLM, SGLang and TensorRT-LLM
// serving: hardware and model catalogs, a memory model, per-engine schedulers
// and a roofline step-time model, with two faces — an OpenAI-compatible live
// server and instant prediction.
package sim
