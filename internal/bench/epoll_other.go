//go:build !linux

package bench

import (
	"context"
	"errors"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
)

// epollSender exists on Linux only; resolveTransport never picks it here.
type epollSender struct{}

func newEpollSender(*client, int) (*epollSender, error) {
	return nil, errors.New("bench: the epoll transport needs Linux")
}

func (*epollSender) start(context.Context, *dataset.Request, *metrics.Record, func([]int32)) {}
func (*epollSender) close()                                                                  {}
