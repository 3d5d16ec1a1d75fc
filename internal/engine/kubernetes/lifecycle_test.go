package kubernetes

import (
	"testing"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/engine/enginetest"
)

// TestKubernetesFailureRules: the kubernetes runtime's handles keep the
// lifecycle's failure rules, on a fake cluster.
func TestKubernetesFailureRules(t *testing.T) {
	enginetest.FailureRules(t, func(t *testing.T) engine.Handle {
		return newKube(t).start(engine.Launch{})
	})
}
