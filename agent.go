package sion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
)

// AgentConfig configures an Agent (S2).
type AgentConfig struct {
	// Name names the agent; required, at most MaxNameBytes. A switch is
	// managed by one agent at a time: another agent of the same name
	// replaces it (the agent restarting), one of another name is refused.
	Name string
	// Place is the managed place (routed by RouteManaged), as its
	// switches have it: its name, ontology and shared key; required.
	Place *EventPlace
	// Transport is how the agent reaches the switches; required.
	Transport transport.Transport
	// Switches are the addresses of the place's switches (where they
	// Serve); the agent connects to each, and AddSwitch adds more.
	// Required: at least one. The agent's model holds the switches it is
	// connected to and their links. A switch it has not heard from (a
	// neighbour not among them) counts as wanting every event and making
	// every type, so what is forwarded to it is never narrowed.
	// Constraints at a switch it is not connected to cannot be deployed:
	// a request that needs one waits for the switch, which gets its part
	// when it connects, and is refused when the Timeout expires.
	Switches []string
	// Timeout is S2's timer: a deployment whose "all bleeders detected"
	// messages have not all arrived within it is refused and rolled
	// back. 0 means half the place's ContractTimeout, so that the refusal
	// reaches the subscriber before its own wait ends.
	Timeout time.Duration
	// Logger receives the agent's warnings; nil means slog.Default().
	Logger *slog.Logger
	// OnDeployment, when set, is called with the record of each
	// deployment once it has ended (granted, refused, or with nothing to
	// grant), from the agent's goroutine: it must not block. Constraints
	// already returns what the deployment left deployed.
	OnDeployment func(Deployment)
}

// Deployment is the record of one deployment of the agent (S2 Fig.
// 3A–3C): what it answered, set A, and per model filter of set B its new
// constraint, bag, send flag and confirm flag.
type Deployment struct {
	// ID numbers the deployment; the bleeders carry it.
	ID uint64
	// Requests names the subscriptions and advertisements it answers,
	// e.g. `subscribe N3/C1 {type ⊑ hazard.Earthquake}`; none for
	// a deployment that follows a cancel, a withdrawal or a change of
	// links, which grants nothing and so waits for no bleeder.
	Requests []string
	// SetA names the network filters whose constraint changes, as
	// "X→Y": the constraint on what switch X forwards to switch Y.
	SetA []string
	// SetB is the model filters of the deployment, in ID order: set A's,
	// and the requesting consumers' ("S/NAME": session NAME of switch S).
	SetB []DeploymentFilter
	// Granted reports that every confirm flag was set in time and the
	// deployment answered requests: they were granted. A deployment
	// without requests (after a cancel, a withdrawal, a change of links)
	// has Granted false and Err nil. Err says why requests were refused.
	Granted bool
	Err     error
	// Elapsed is how long the deployment took.
	Elapsed time.Duration
}

// DeploymentFilter is one model filter of a deployment's set B (S2).
type DeploymentFilter struct {
	// Name names the model filter: "X→Y" for a network filter, "S/NAME"
	// for the consumer filter of session NAME of switch S ("S/session n"
	// when the session has no name or shares it).
	Name string
	// Old and Constraint are a network filter's constraint before and
	// after: the canonical texts of its filters, sorted; ["{type ⊑ *}"]
	// is no constraint (every event crosses), none is nothing crosses.
	Old, Constraint []string
	// Send is the send flag: the filter sends a bleeder downstream once
	// its constraint is active.
	Send bool
	// Bag names the model filters whose bleeders it waits for.
	Bag []string
	// Confirmed is the confirm flag: its "all bleeders detected" arrived.
	Confirmed bool
}

// AgentStats counts an agent's work over its life.
type AgentStats struct {
	// Switches is the number of switches connected now.
	Switches int
	// Deployments counts the deployments, Granted and Refused the
	// requests (subscriptions and advertisements) granted and refused.
	Deployments, Granted, Refused uint64
	// Sent and Received count the messages on the agents' connections.
	Sent, Received uint64
}

// Agent is S2's agent for a managed place (RouteManaged): it connects to
// the place's switches as an admitted entity, keeps the network model
// they report — links, advertisements, subscriptions, deployed
// constraints — computes the optimal constraint of every link direction
// and deploys the changes with bleeder markers, granting or refusing each
// subscription and advertisement (the contract). Deployments run one at a
// time; requests that arrive meanwhile are answered together by the
// next. Any entity may run it; its connections go through the switches'
// admission (the place's shared key, Admit with AdmissionRequest.Agent).
// Its methods are safe for concurrent use.
type Agent struct {
	cfg     AgentConfig
	log     *slog.Logger
	timeout time.Duration

	in     chan agentInput
	cancel context.CancelFunc
	life   context.Context // ends at Close; the loop and connections run within it
	wg     sync.WaitGroup
	closed atomic.Bool

	mu    sync.Mutex
	md    *agentModel           // mu
	links map[string]*agentLink // mu; by switch name
	// What Stats and Constraints read without waiting for the loop,
	// which holds mu while it computes.
	deployments, granted, refused atomic.Uint64
	switches                      atomic.Int64
	deployed                      atomic.Pointer[map[string][]string]

	addrs map[string]bool // mu; addresses being served
	cur   *deployment     // loop only
	ready bool            // loop only: the Models of StartAgent's switches are in
	dep   uint64          // loop only: the last deployment's ID
	queue []agentInput    // loop only: changes waiting for the deployment in flight
	dirty map[dirKey]bool // loop only: directions to deploy although no request asks
	sent  atomic.Uint64
	recv  atomic.Uint64
}

// agentInput is what the connections hand the agent's loop.
type agentInput struct {
	sw     string
	link   *agentLink
	msg    linkctl.Message        // *Model, *ModelChange or *Detected
	follow []*linkctl.ModelChange // with a Model: the changes that complete it
	ended  bool
	ready  bool // StartAgent has every switch's Model: deploy from now on
	// snapshot: a change that completes a switch's Model (in.follow)
	snapshot bool
}

// agentLink is the agent's connection to one switch.
type agentLink struct {
	log  *slog.Logger
	sw   string
	addr string
	conn transport.Conn
	lim  wire.Limits
	mu   sync.Mutex
	q    [][]byte
	wake chan struct{}
}

// StartAgent connects an agent to every switch of cfg.Switches and
// starts it; it returns once each has sent its part of the model, or
// ctx's error or a switch's refusal (and no agent: what it had started
// is closed) when one cannot be reached by then. Every address must be
// reachable: AddSwitch adds switches to a running agent.
// Errors: ErrInvalidConfig for a missing field or a place that is not
// managed; a switch's refusal (ErrNotAdmitted, ErrLinkRefused).
func StartAgent(ctx context.Context, cfg AgentConfig) (*Agent, error) {
	switch {
	case cfg.Place == nil || cfg.Transport == nil || len(cfg.Switches) == 0:
		return nil, fmt.Errorf("%w: AgentConfig needs Place, Transport and Switches", ErrInvalidConfig)
	case cfg.Place.cfg.Routing != RouteManaged:
		return nil, fmt.Errorf("%w: place %q is routed %v, not managed (RouteManaged)", ErrInvalidConfig, cfg.Place.Name(), cfg.Place.cfg.Routing)
	}
	if err := checkName("AgentConfig.Name", cfg.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, timeout: cfg.Timeout, in: make(chan agentInput, 256),
		md: newAgentModel(cfg.Place.Ontology()), links: map[string]*agentLink{}, addrs: map[string]bool{}, dirty: map[dirKey]bool{}}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.timeout <= 0 {
		a.timeout = cfg.Place.cfg.ContractTimeout / 2
	}
	a.life, a.cancel = context.WithCancel(context.Background())
	a.wg.Go(a.loop)
	errs := make(chan error, len(cfg.Switches))
	for _, addr := range cfg.Switches {
		go func() { errs <- a.AddSwitch(ctx, addr) }()
	}
	var err error
	for range cfg.Switches {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		a.Close()
		return nil, err
	}
	// Deploy only from a whole model: a switch not heard from yet could
	// neither take its part of a deployment nor pass its bleeders on.
	a.input(agentInput{ready: true})
	return a, nil
}

// AddSwitch connects the agent to the switch serving at addr and adds it
// to the model; it returns once the switch has sent its part. While the
// agent runs, a connection that ends is made again, with a growing wait
// between attempts (up to 5 s). Errors: as StartAgent's; ErrClosed.
func (a *Agent) AddSwitch(ctx context.Context, addr string) error {
	a.mu.Lock()
	if a.closed.Load() || a.addrs[addr] {
		a.mu.Unlock()
		if a.closed.Load() {
			return fmt.Errorf("%w: agent %q", ErrClosed, a.cfg.Name)
		}
		return nil
	}
	a.addrs[addr] = true
	a.mu.Unlock()
	l, md, err := a.connect(ctx, addr)
	if err != nil {
		a.mu.Lock()
		delete(a.addrs, addr)
		a.mu.Unlock()
		return err
	}
	a.input(agentInput{sw: l.sw, link: l, msg: md.model, follow: md.follow}) // before StartAgent's ready
	a.wg.Go(func() { a.serve(l) })
	return nil
}

// connect dials the switch at addr, opens the agent's session and asks
// to manage it; it returns the connection and the switch's part of the
// model.
func (a *Agent) connect(ctx context.Context, addr string) (*agentLink, *snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultHandshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(a.life, cancel)
	defer stop()
	conn, err := a.cfg.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, nil, fmt.Errorf("sion: agent %q to %s: %w", a.cfg.Name, addr, err)
	}
	lim := wire.DefaultLimits()
	lim.MaxFrameBytes = conn.MaxFrameBytes()
	fail := func(err error) (*agentLink, *snapshot, error) {
		conn.Close()
		return nil, nil, fmt.Errorf("sion: agent %q to %s: %w", a.cfg.Name, addr, err)
	}
	if _, err := clientHandshake(ctx, conn, lim, &wire.Hello{Version: protocolVersion, Session: "agent:" + a.cfg.Name}, a.cfg.Place.cfg.SharedKey); err != nil {
		return fail(err)
	}
	f, err := linkctl.Encode(&linkctl.Manage{Agent: a.cfg.Name, Place: a.cfg.Place.Name()}, lim)
	if err != nil {
		return fail(err)
	}
	reply, err := exchangeFrame(ctx, conn, lim, f)
	if err != nil {
		return fail(err)
	}
	c, ok := reply.(*wire.Control)
	if !ok {
		return fail(fmt.Errorf("%w: the switch answered Manage with a %v frame", ErrProtocol, reply.Kind()))
	}
	m, err := linkctl.Decode(c)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	md, ok := m.(*linkctl.Model)
	if !ok {
		return fail(fmt.Errorf("%w: the switch answered Manage with a %v", ErrProtocol, m.Kind()))
	}
	a.recv.Add(1)
	snap := &snapshot{model: md}
	for range md.Follow {
		f, err := conn.Recv(ctx)
		if err != nil {
			return fail(err)
		}
		w, err := wire.Decode(f, lim)
		if err != nil {
			return fail(fmt.Errorf("%w: %w", ErrProtocol, err))
		}
		c, ok := w.(*wire.Control)
		if !ok {
			return fail(fmt.Errorf("%w: the switch completed its Model with a %v frame", ErrProtocol, w.Kind()))
		}
		m, err := linkctl.Decode(c)
		if err != nil {
			return fail(fmt.Errorf("%w: %w", ErrProtocol, err))
		}
		ch, ok := m.(*linkctl.ModelChange)
		if !ok || ch.Op != linkctl.ChangeAdvertise && ch.Op != linkctl.ChangeSubscribe {
			return fail(fmt.Errorf("%w: the switch completed its Model with a %v", ErrProtocol, m.Kind()))
		}
		a.recv.Add(1)
		snap.follow = append(snap.follow, ch)
	}
	return &agentLink{log: a.log, sw: md.Switch, addr: addr, conn: conn, lim: lim, wake: make(chan struct{}, 1)}, snap, nil
}

// snapshot is a switch's whole part of the model: its Model and the
// changes that complete it.
type snapshot struct {
	model  *linkctl.Model
	follow []*linkctl.ModelChange
}

// serve runs the connection l, whose Model the loop has — its writer,
// and its reader handing the loop what the switch sends — and makes it
// again when it ends, until the agent closes.
func (a *Agent) serve(l *agentLink) {
	wait := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithCancel(a.life)
		var wg sync.WaitGroup
		wg.Go(func() { l.write(ctx, &a.sent) })
		err := a.read(ctx, l)
		cancel()
		l.conn.Close()
		wg.Wait()
		a.input(agentInput{sw: l.sw, link: l, ended: true})
		if a.life.Err() != nil {
			return
		}
		a.log.Warn("sion: agent lost a switch; connecting again", "agent", a.cfg.Name, "switch", l.sw, "err", err)
		for {
			select {
			case <-time.After(wait):
			case <-a.life.Done():
				return
			}
			wait = min(2*wait, 5*time.Second)
			nl, snap, err := a.connect(a.life, l.addr)
			if err == nil {
				l, wait = nl, 100*time.Millisecond
				a.input(agentInput{sw: l.sw, link: l, msg: snap.model, follow: snap.follow})
				break
			}
		}
	}
}

// input hands in to the loop, unless the agent has closed.
func (a *Agent) input(in agentInput) {
	select {
	case a.in <- in:
	case <-a.life.Done():
	}
}

// read hands the loop each message of l until the connection ends.
func (a *Agent) read(ctx context.Context, l *agentLink) error {
	for {
		f, err := l.conn.Recv(ctx)
		if err != nil {
			return err
		}
		w, err := wire.Decode(f, l.lim)
		if err != nil {
			return fmt.Errorf("%w: from switch %q: %w", ErrProtocol, l.sw, err)
		}
		c, ok := w.(*wire.Control)
		if !ok {
			if e, ok := w.(*wire.Error); ok {
				return fromWireError(e)
			}
			return fmt.Errorf("%w: switch %q sent a %v frame", ErrProtocol, l.sw, w.Kind())
		}
		m, err := linkctl.Decode(c)
		if err != nil {
			return fmt.Errorf("%w: from switch %q: %w", ErrProtocol, l.sw, err)
		}
		a.recv.Add(1)
		switch m.(type) {
		case *linkctl.ModelChange, *linkctl.Detected:
			a.input(agentInput{sw: l.sw, link: l, msg: m})
		default:
			return fmt.Errorf("%w: switch %q sent a %v message", ErrProtocol, l.sw, m.Kind())
		}
	}
}

// send queues m for the switch at the other end of l. A message that
// cannot be encoded — a Deploy whose constraints do not fit the
// connection's frames — is logged and not sent: the deployment waiting
// on it is refused when the timer expires.
func (l *agentLink) send(m linkctl.Message) {
	f, err := linkctl.Encode(m, l.lim)
	if err != nil {
		l.log.Warn("sion: agent's message not sent", "switch", l.sw, "kind", m.Kind().String(), "err", err)
		return
	}
	l.mu.Lock()
	l.q = append(l.q, f)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *agentLink) write(ctx context.Context, sent *atomic.Uint64) {
	for {
		select {
		case <-l.wake:
		case <-ctx.Done():
			return
		}
		l.mu.Lock()
		batch := l.q
		l.q = nil
		l.mu.Unlock()
		for _, f := range batch {
			if err := l.conn.Send(ctx, f); err != nil {
				l.conn.Close()
				return
			}
			sent.Add(1)
		}
	}
}

// Close stops the agent: its connections end (the switches keep the
// constraints deployed; requests wait for an agent until their
// ContractTimeout) and its goroutines are waited for. Idempotent.
func (a *Agent) Close() error {
	a.closed.Store(true)
	a.cancel()
	a.mu.Lock()
	for _, l := range a.links {
		l.conn.Close()
	}
	a.mu.Unlock()
	a.wg.Wait()
	return nil
}

// Stats returns the agent's counters.
func (a *Agent) Stats() AgentStats {
	return AgentStats{
		Switches:    int(a.switches.Load()),
		Deployments: a.deployments.Load(), Granted: a.granted.Load(), Refused: a.refused.Load(),
		Sent: a.sent.Load(), Received: a.recv.Load(),
	}
}

// Constraints returns the constraint of every link direction as the
// agent has deployed it, by name ("X→Y": what X forwards to Y): the
// canonical texts of its filters, sorted; ["{type ⊑ *}"] is no
// constraint; directions that pass nothing are left out. It does not
// wait for a computation in progress: it returns what the agent had
// deployed when its last deployment ended. A deployment ends before its
// record goes to OnDeployment and its verdicts to the switches: called
// from OnDeployment, or once a granted Subscribe or Advertise has
// returned, it returns what that deployment (or a later one) deployed.
func (a *Agent) Constraints() map[string][]string {
	out := map[string][]string{}
	if p := a.deployed.Load(); p != nil {
		for k, v := range *p {
			out[k] = slices.Clone(v)
		}
	}
	return out
}

// publish records what is deployed now, and the switches connected, for
// Constraints and Stats. mu must be held.
func (a *Agent) publish() {
	m := map[string][]string{}
	for _, mf := range a.md.dirs {
		if len(mf.deployed) > 0 {
			m[mf.name] = mf.deployed
		}
	}
	a.deployed.Store(&m)
	a.switches.Store(int64(len(a.links)))
}
