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
		{"A100 80GB PCIe", "A100-PCIe"},
		{"NVIDIA A100-SXM4-40GB", "A100-40GB"},
		{"h100-nvl", "H100-NVL"},
		{"H200 NVL", "H200"},
		{"MI300X", "MI300X"},
	} {
		if got := simGPU(tc.in); got != tc.want {
			t.Errorf("simGPU(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDeviceOf: the device the engines' defaults read, from the catalog by
// the spec's GPU name, with the memory the name states where it states one
// (an A100-40GB gets SGLang's 4096-token chunk, not the 80 GB card's 8192).
func TestDeviceOf(t *testing.T) {
	for _, tc := range []struct {
		in   string
		name string
		mem  float64
	}{
		{"H100-SXM-80GB", "H100", 80},
		{"NVIDIA H100 80GB HBM3", "H100", 80},
		{"H100", "H100", 79.2},
		{"A100-40GB", "A100-40GB", 40},
		{"NVIDIA A100-SXM4-40GB", "A100-40GB", 40},
		// The catalog's PCIe card is the 80 GB one; the name's 40 GB
		// is what the engines' thresholds read.
		{"NVIDIA A100-PCIE-40GB", "A100-PCIe", 40},
		{"H200 141GB", "H200", 141},
		{"MI300X", "", 0},
	} {
		if d := DeviceOf(tc.in); d.Name != tc.name || d.MemGiB != tc.mem {
			t.Errorf("DeviceOf(%q) = %+v, want %s with %g GiB", tc.in, d, tc.name, tc.mem)
		}
	}
}
