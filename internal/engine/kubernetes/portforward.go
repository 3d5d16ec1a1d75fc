package kubernetes

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// forward keeps a port-forward from 127.0.0.1:localPort to the pod's port
// open through the API server (SPDY, as kubectl port-forward), opening it
// again if it ends while the pod runs, until the handle's background
// context ends. up is closed when it first listens.
func (h *handle) forward() {
	for try := 0; h.fw.Err() == nil; try++ {
		err := h.forwardOnce()
		if h.fw.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("closed")
		}
		if try < 20 || try%60 == 0 {
			h.note("perflab: port-forward to pod " + h.sp.pod.Name + ": " + err.Error() + "; opening it again")
		}
		select {
		case <-h.fw.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// forwardOnce runs one port-forward until it ends.
func (h *handle) forwardOnce() error {
	cfg := h.rt.restCfg
	if cfg == nil {
		return errors.New("a port-forward needs a REST config (Runtime.Config), or use PodIP access")
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes: port-forward: %w", err)
	}
	rc, err := h.rt.restClient()
	if err != nil {
		return err
	}
	u := rc.Post().Resource("pods").Namespace(h.ns).Name(h.sp.pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	ready := make(chan struct{})
	ports := []string{fmt.Sprintf("%d:%d", h.localPort, h.rt.port())}
	fw, err := portforward.NewOnAddressesWithContext(h.fw, dialer, []string{"127.0.0.1"}, ports, ready, io.Discard, noteWriter{h})
	if err != nil {
		return fmt.Errorf("kubernetes: port-forward: %w", err)
	}
	go func() {
		select {
		case <-ready:
			h.setUp()
		case <-h.fw.Done():
		}
	}()
	if err := fw.ForwardPorts(); err != nil {
		return fmt.Errorf("kubernetes: port-forward: %w", err)
	}
	return nil
}

// noteWriter writes a port-forward's error output into the handle's log,
// as notes (not progress).
type noteWriter struct{ h *handle }

func (w noteWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			w.h.note("perflab: port-forward: " + l)
		}
	}
	return len(p), nil
}
