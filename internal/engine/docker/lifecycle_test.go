package docker

import (
	"context"
	"sync"
	"testing"

	"github.com/moby/moby/client"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/engine/enginetest"
)

// stopClient is a daemon that only stops and removes containers: enough
// for a handle's Stop. Removing the container ends the handle's life, as
// its run goroutine would.
type stopClient struct {
	client.APIClient
	once sync.Once
	h    *handle
}

func (c *stopClient) ContainerStop(context.Context, string, client.ContainerStopOptions) (client.ContainerStopResult, error) {
	return client.ContainerStopResult{}, nil
}

func (c *stopClient) ContainerRemove(context.Context, string, client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	c.once.Do(func() { close(c.h.done) })
	return client.ContainerRemoveResult{}, nil
}

// TestDockerFailureRules: the docker runtime's handles keep the
// lifecycle's failure rules.
func TestDockerFailureRules(t *testing.T) {
	enginetest.FailureRules(t, func(t *testing.T) engine.Handle {
		cli := &stopClient{}
		h := newHandle(&Runtime{}, cli, engine.Launch{Config: engine.Config{Engine: engine.VLLM, Model: "m"}},
			spec{name: "perflab-test", image: "img"}, devNull(t), "")
		cli.h = h
		// Started: what Stop waits for before it stops the container.
		close(h.launched)
		close(h.containerUp)
		return h
	})
}
