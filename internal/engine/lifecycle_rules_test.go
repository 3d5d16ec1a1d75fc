package engine_test

import (
	"context"
	"testing"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/engine/enginetest"
)

// TestProcessFailureRules: the process runtime's handles keep the
// lifecycle's failure rules, on the fake engine.
func TestProcessFailureRules(t *testing.T) {
	enginetest.FailureRules(t, func(t *testing.T) engine.Handle {
		h, err := (&engine.Process{}).Start(context.Background(), engine.FakeLaunch(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Stop(context.Background()) })
		return h
	})
}
