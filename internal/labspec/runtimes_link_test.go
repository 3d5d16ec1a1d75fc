package labspec

// The spec looks runtimes up by name; its tests read specs for docker and
// kubernetes, so they link those runtimes as cmd/perflab does.
import (
	_ "github.com/perflab/perflab/internal/runtimes/dockerrt"
	_ "github.com/perflab/perflab/internal/runtimes/kubert"
)
