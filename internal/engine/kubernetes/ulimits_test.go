package kubernetes

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestNoUlimitsInThePodAPI: the docker runtime gives each engine container
// TensorRT-LLM's ulimits (stack 64 MiB, memlock unlimited); a pod cannot be
// given any, since the Kubernetes API this module builds against has no
// field for them (kubernetes/kubernetes#3595; KEP-5758 adds
// securityContext.ulimits, alpha from 1.38). docs/protocols.md, row 11,
// says what perflab does meanwhile. When the API gains the field, this
// fails: set stack and memlock there in buildPod, and change this test to
// check them.
func TestNoUlimitsInThePodAPI(t *testing.T) {
	for _, name := range []string{"Ulimits", "RLimits", "Rlimits"} {
		if _, ok := reflect.TypeOf(corev1.SecurityContext{}).FieldByName(name); ok {
			t.Errorf("corev1.SecurityContext has %s now: give engine pods TensorRT-LLM's stack and memlock limits there", name)
		}
	}
}
