package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport"
)

// network is the switches a run started in this process, each serving on
// its own listener.
type network struct {
	mu     sync.Mutex
	sws    []*sion.Switch
	served []chan error
	closed []bool
}

// start starts a switch named name in place, serving on tr at the
// address name, and joins it to the place's overlay through via ("" for
// the first switch).
func (n *network) start(ctx context.Context, tr transport.Transport, place *sion.EventPlace, name, via string) (*sion.Switch, error) {
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: name, Place: place})
	if err != nil {
		return nil, err
	}
	l, err := tr.Listen(name)
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- sw.Serve(context.Background(), l) }()
	n.mu.Lock()
	n.sws = append(n.sws, sw)
	n.served = append(n.served, served)
	n.closed = append(n.closed, false)
	n.mu.Unlock()
	for sw.State() != sion.Active { // Serve gives the switch its address
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(time.Millisecond)
	}
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sw.Join(jctx, tr, via); err != nil {
		return nil, fmt.Errorf("%s joining through %q: %w", name, via, err)
	}
	return sw, nil
}

// kill closes switch sw (as if it died: no Leave) and waits for it.
func (n *network) kill(sw *sion.Switch) error {
	n.mu.Lock()
	i := slices.Index(n.sws, sw)
	if i < 0 || n.closed[i] {
		n.mu.Unlock()
		return nil
	}
	n.closed[i] = true
	served := n.served[i]
	n.mu.Unlock()
	return errors.Join(sw.Close(), <-served)
}

// close closes every switch and waits for them.
func (n *network) close() error {
	n.mu.Lock()
	sws := slices.Clone(n.sws)
	n.mu.Unlock()
	var errs []error
	for _, sw := range sws {
		errs = append(errs, n.kill(sw))
	}
	return errors.Join(errs...)
}
