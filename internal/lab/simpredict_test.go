package lab

import "testing"

func TestSimGPU(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"H100", "H100"},
		{"H100-SXM-80GB", "H100"},
		{"NVIDIA H100 80GB HBM3", "H100"},
		{"h100 pcie", "H100-PCIe"},
		{"NVIDIA H100 PCIe 80GB", "H100-PCIe"},
		{"H100_PCIE", "H100-PCIe"},
		{"nvidia-a100-sxm4-80gb", "A100"},
		{"H200 NVL", "H200"},
		{"MI300X", "MI300X"},
	} {
		if got := simGPU(tc.in); got != tc.want {
			t.Errorf("simGPU(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
