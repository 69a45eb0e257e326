package sion

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
)

// agentConn is a switch's end of the connection its place's agent (S2)
// opened to it: out-of-band signalling, never a link. Messages to the
// agent are queued (their number is bounded by the switch's
// subscriptions and advertisements) and written in order by one
// goroutine.
type agentConn struct {
	sw   string // the switch's name
	log  *slog.Logger
	name string // the agent's name
	conn transport.Conn
	lim  wire.Limits

	mu     sync.Mutex
	q      [][]byte // mu; frames for the writer
	qBytes int      // mu; their bytes, at most maxAgentQueueBytes
	wake   chan struct{}
	ended  chan struct{} // closed when the connection is over and the switch has forgotten it

	sent, received *atomic.Uint64
}

// maxAgentQueueBytes bounds the bytes a switch queues for its agent: an
// agent that stops reading costs the switch at most this much memory.
const maxAgentQueueBytes = 256 << 20

// send queues m for the agent; nothing when a is nil (no agent is
// connected). A message that cannot be encoded — a Model whose
// constraints do not fit the connection's frames — is logged and not
// sent; what waits on it (the agent's connection, a request) runs into
// its timeout.
func (a *agentConn) send(m linkctl.Message) {
	if a == nil {
		return
	}
	f, err := linkctl.Encode(m, a.lim)
	if err != nil {
		a.log.Warn("sion: message to the agent not sent", "switch", a.sw, "agent", a.name, "kind", m.Kind().String(), "err", err)
		return
	}
	a.mu.Lock()
	if a.qBytes+len(f) > maxAgentQueueBytes {
		// An agent that does not read: end its connection (the switch
		// forgets it; when it comes back it gets a whole Model).
		a.mu.Unlock()
		a.log.Warn("sion: agent does not read; connection closed", "switch", a.sw, "agent", a.name, "queued bytes", a.qBytes)
		a.conn.Close()
		return
	}
	a.q = append(a.q, f)
	a.qBytes += len(f)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// write sends the queued frames until ctx ends or a send fails.
func (a *agentConn) write(ctx context.Context) {
	for {
		select {
		case <-a.wake:
		case <-ctx.Done():
			return
		}
		a.mu.Lock()
		batch := a.q
		a.q, a.qBytes = nil, 0
		a.mu.Unlock()
		for _, f := range batch {
			if err := a.conn.Send(ctx, f); err != nil {
				a.conn.Close()
				return
			}
			a.sent.Add(1)
		}
	}
}

// acceptAgent serves an agent's Manage request that arrived on conn as
// the first request of session sess (S2): in a managed place, an agent
// the place admits (Admit is asked with AdmissionRequest.Agent) gets the
// switch's Model and then every change, and its Deploy and Verdict
// messages are carried out, until the connection ends. A second agent
// while one is connected is refused, unless it has the same name (the
// agent reconnecting): it replaces the first.
func (m *managedSwitch) acceptAgent(ctx context.Context, conn transport.Conn, sess *Session, req *linkctl.Manage) {
	sw := m.sw
	refuse := func(code uint16, err error) { sw.refuseRequest(ctx, conn, "sion: agent refused", code, err) }
	if req.Place != sw.place.Name() {
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is in place %q, the agent %q manages place %q", ErrLinkRefused, sw.cfg.Name, sw.place.Name(), req.Agent, req.Place))
		return
	}
	if admit := sw.place.cfg.Admit; admit != nil {
		ar := AdmissionRequest{Place: sw.place.Name(), Switch: sw.cfg.Name, Session: req.Agent, Agent: true, Remote: conn.RemoteAddr(), TLS: tlsState(conn)}
		if err := admit(ctx, ar); err != nil {
			refuse(codeNotAdmitted, fmt.Errorf("%w: agent %q: %w", ErrNotAdmitted, req.Agent, err))
			return
		}
	}
	lim := wire.DefaultLimits()
	lim.MaxFrameBytes = conn.MaxFrameBytes()
	a := &agentConn{sw: sw.cfg.Name, log: sw.log, name: req.Agent, conn: conn, lim: lim, wake: make(chan struct{}, 1), ended: make(chan struct{}), sent: &sw.agentSent, received: &sw.agentReceived}
	m.mu.Lock()
	if old := m.agent; old != nil {
		if old.name != req.Agent {
			m.mu.Unlock()
			refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is managed by agent %q", ErrLinkRefused, sw.cfg.Name, old.name))
			return
		}
		m.mu.Unlock()
		old.conn.Close()
		<-old.ended
		m.mu.Lock()
	}
	if sw.isClosed() {
		m.mu.Unlock()
		return
	}
	m.agent = a
	for _, msg := range m.model() { // under mu: before any change
		a.send(msg)
	}
	m.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { a.write(ctx) })
	err := m.readAgent(ctx, a)
	if err != nil && ctx.Err() == nil {
		sw.log.Warn("sion: agent connection ended", "switch", sw.cfg.Name, "agent", req.Agent, "err", err)
	}
	cancel()
	conn.Close()
	wg.Wait()
	m.mu.Lock()
	if m.agent == a {
		m.agent = nil
	}
	m.mu.Unlock()
	close(a.ended)
}

// readAgent carries out the agent's messages until the connection ends.
func (m *managedSwitch) readAgent(ctx context.Context, a *agentConn) error {
	for {
		f, err := a.conn.Recv(ctx)
		if err != nil {
			return err
		}
		w, err := wire.Decode(f, a.lim)
		if err != nil {
			return fmt.Errorf("%w: from agent %q: %w", ErrProtocol, a.name, err)
		}
		c, ok := w.(*wire.Control)
		if !ok {
			if _, bye := w.(*wire.Bye); bye {
				return nil
			}
			return fmt.Errorf("%w: agent %q sent a %v frame", ErrProtocol, a.name, w.Kind())
		}
		msg, err := linkctl.Decode(c)
		if err != nil {
			return fmt.Errorf("%w: from agent %q: %w", ErrProtocol, a.name, err)
		}
		a.received.Add(1)
		switch msg := msg.(type) {
		case *linkctl.Deploy:
			if err := checkDeploy(msg); err != nil {
				return fmt.Errorf("%w: agent %q: %w", ErrProtocol, a.name, err)
			}
			m.deploy(msg)
		case *linkctl.Verdict:
			m.verdict(msg)
		default:
			return fmt.Errorf("%w: agent %q sent a %v message", ErrProtocol, a.name, msg.Kind())
		}
	}
}

// checkDeploy refuses a Deploy with a constraint that does not compile:
// carried out, it would leave the link without what the agent meant it
// to pass. The filters are compiled again when they are installed.
func checkDeploy(d *linkctl.Deploy) error {
	for _, f := range d.Filters {
		for _, text := range f.Constraint {
			if _, err := filter.Compile(text); err != nil {
				return fmt.Errorf("deployment %d: filter %q of the constraint toward %q does not compile: %w", d.Deployment, text, f.Peer, err)
			}
		}
	}
	return nil
}
