package sion

import (
	"context"
	"fmt"

	"github.com/sion-go/sion/internal/guard"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
)

// accept serves first, the first request of session sess on conn, when
// it asks for a link — a shared link's establishment request (acceptLink)
// or a federation request (acceptGateway) — and reports whether it did;
// the link runs until it ends. Any other request is a remote session's.
func (sw *Switch) accept(ctx context.Context, conn transport.Conn, sess *Session, first wire.Message) bool {
	c, ok := first.(*wire.Control)
	if !ok {
		return false
	}
	m, err := linkctl.Decode(c)
	if why := sw.front.linking(); why != nil && err == nil {
		sw.refuseRequest(ctx, conn, "sion: link request refused", codeLinkRefused, fmt.Errorf("%w: %w", ErrLinkRefused, why))
		return true
	}
	if err == nil {
		err = checkEndNames(m)
	}
	if err != nil {
		sw.refuseRequest(ctx, conn, "sion: link request refused", codeProtocol, fmt.Errorf("%w: %w", ErrProtocol, err))
		return true
	}
	switch m := m.(type) {
	case *linkctl.LinkRequest:
		sw.acceptLink(ctx, conn, sess, m)
	case *linkctl.Federate:
		sw.acceptGateway(ctx, conn, sess, m)
	case *linkctl.OverlayLink:
		sw.routing.acceptOverlay(ctx, conn, sess, m)
	case *linkctl.Manage:
		sw.routing.acceptAgent(ctx, conn, sess, m)
	default:
		err = fmt.Errorf("a %v cannot open a link", m.Kind())
		sw.refuseRequest(ctx, conn, "sion: link request refused", codeProtocol, fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	return true
}

// checkEndNames checks the names a peer gives of itself in a message that
// opens a link, or in the accept that answers one, as this switch's own
// are checked (checkName: not empty, at most MaxNameBytes, UTF-8 without
// NUL or newline): a name no SwitchConfig, PlaceConfig, GatewayConfig or
// AgentConfig could hold is a protocol error before it reaches a log, an
// admission hook, a table of links or the management view. An accept's
// place may be empty.
func checkEndNames(m linkctl.Message) error {
	var names [][2]string // what, name
	switch m := m.(type) {
	case *linkctl.LinkRequest:
		names = [][2]string{{"the requesting switch's name", m.Switch}, {"its place's name", m.Place}}
	case *linkctl.Federate:
		names = [][2]string{{"the requesting switch's name", m.Switch}, {"its place's name", m.Place}, {"the gateway's name", m.Gateway}}
	case *linkctl.OverlayLink:
		names = [][2]string{{"the requesting switch's name", m.Switch}, {"its place's name", m.Place}}
	case *linkctl.Manage:
		names = [][2]string{{"the agent's name", m.Agent}, {"its place's name", m.Place}}
	case *linkctl.LinkAccept:
		names = [][2]string{{"the accepting switch's name", m.Switch}}
		if m.Place != "" {
			names = append(names, [2]string{"its place's name", m.Place})
		}
	}
	for _, n := range names {
		if err := checkName(n[0], n[1]); err != nil {
			return fmt.Errorf("%v: %w", m.Kind(), err)
		}
	}
	return nil
}

// refuseRequest refuses a link or federation request that arrived on
// conn: it logs msg with err like every refusal (at most once per source
// and interval, see Serve; before the count: who sees the count sees the
// record), counts the refusal and answers an Error frame with code.
func (sw *Switch) refuseRequest(ctx context.Context, conn transport.Conn, msg string, code uint16, err error) {
	sw.refusal(guard.Source(conn.RemoteAddr()), msg, "err", err)
	sw.refused.Add(1)
	if f, e := wire.Encode(nil, &wire.Error{Code: code, Message: err.Error()}); e == nil {
		sctx, cancel := context.WithTimeout(ctx, DefaultHandshakeTimeout)
		conn.Send(sctx, f)
		cancel()
	}
}

// acceptLink serves a shared-link establishment request that arrived on a
// connection Serve accepted, as the first request of session sess: it
// checks the request, answers, and runs the link until it ends.
func (sw *Switch) acceptLink(ctx context.Context, conn transport.Conn, sess *Session, req *linkctl.LinkRequest) {
	refuse := func(code uint16, err error) { sw.refuseRequest(ctx, conn, "sion: shared link refused", code, err) }
	peer, place, id := req.Switch, req.Place, req.Link
	addr := req.Addr     // where the requester serves, "" if nowhere
	absorb := req.Absorb // an absorb request: link to this address
	sw.mu.RLock()
	left := sw.left
	sw.mu.RUnlock()
	switch {
	case left && absorb == "":
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q has left place %q (suspended)", ErrLinkRefused, sw.cfg.Name, sw.place.Name()))
		return
	case place != sw.place.Name() && !req.Merge:
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is in place %q, the request came from place %q (LinkConfig.Merge combines places)", ErrLinkRefused, sw.cfg.Name, sw.place.Name(), place))
		return
	case peer == sw.cfg.Name:
		refuse(codeLinkRefused, fmt.Errorf("%w: the requesting switch has this switch's name %q", ErrLinkRefused, peer))
		return
	}
	if admit := sw.place.cfg.Admit; admit != nil {
		req := AdmissionRequest{Place: sw.place.Name(), Switch: sw.cfg.Name, Session: peer, Link: true, Remote: conn.RemoteAddr(), TLS: tlsState(conn)}
		if err := admit(ctx, req); err != nil {
			refuse(codeNotAdmitted, fmt.Errorf("%w: shared link from switch %q in place %q: %w", ErrNotAdmitted, peer, place, err))
			return
		}
	}
	if absorb != "" {
		if err := sw.absorbed(ctx, conn, peer, absorb); err != nil {
			code := errorCode(err)
			if code == codeInternal {
				code = codeLinkRefused
			}
			refuse(code, fmt.Errorf("absorb into %q: %w", peer, err))
		}
		return
	}
	// Tree rule: one request per switch; a request of the same link
	// (re-established after a failure this side has not noticed yet)
	// replaces the stale one.
	sw.mu.Lock()
	if sw.parent != nil && sw.parent.peer() == peer {
		sw.mu.Unlock()
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is the parent of %q; linking back would close a loop (S1 tree rule)", ErrLinkRefused, peer, sw.cfg.Name))
		return
	}
	stale := sw.children[peer]
	parent := sw.parent
	sw.mu.Unlock()
	if parent != nil {
		// This switch's own link must be up first: two switches asking
		// each other at once would otherwise both accept and close a
		// loop. Wait for it a while; refuse (retry later) if it does not
		// come up.
		wctx, cancel := context.WithTimeout(ctx, linkWait)
		up := parent.waitUp(wctx)
		cancel()
		sw.mu.RLock()
		still := sw.parent == parent
		sw.mu.RUnlock()
		if !up && still && !parent.released() {
			refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is establishing its own shared link; retry", ErrLinkRefused, sw.cfg.Name))
			return
		}
		if !up {
			parent = nil // it became a root meanwhile
		}
	}
	if parent != nil {
		// A requester among this switch's ancestors would close a loop:
		// ask them (an n-hop probe toward the parents, S1).
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		ancestors, complete := sw.probe(pctx, sw.place.cfg.TTL, TowardParents, 0)
		cancel()
		for _, a := range ancestors {
			if a.Switch == peer {
				refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is an ancestor of %q (%d links up); linking would close a loop (S1 tree rule)", ErrLinkRefused, peer, sw.cfg.Name, a.Hops))
				return
			}
		}
		if !complete {
			refuse(codeLinkRefused, fmt.Errorf("%w: switch %q could not check that the link would not close a loop: its ancestors did not all answer within %v, or one of them is still linking; retry", ErrLinkRefused, sw.cfg.Name, probeTimeout))
			return
		}
	}
	if stale != nil && stale.id != id && stale.alive(ctx) {
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q has a shared link to %q already; a switch makes at most one establishment request (S1 tree rule)", ErrLinkRefused, peer, sw.cfg.Name))
		return
	}
	if stale != nil {
		stale.r.close()
		<-stale.r.finished
	}
	sess.mu.Lock()
	noSubs := len(sess.subs) == 0
	sess.mu.Unlock()
	if !noSubs {
		refuse(codeProtocol, fmt.Errorf("%w: a link request must be the session's first request", ErrProtocol))
		return
	}
	r, linkCtx := sw.newRouter(ctx, conn, peer, false, sess, newSharedEnd())
	r.sendAccept()
	child := &childLink{id: id, r: r, addr: addr}
	sw.mu.Lock()
	if sw.closed {
		sw.mu.Unlock()
		r.close()
		return
	}
	sw.children[peer] = child
	sw.mu.Unlock()
	r.start(linkCtx)
	sw.log.Info("sion: shared link accepted", "switch", sw.cfg.Name, "child", peer, "remote", conn.RemoteAddr())
	<-r.finished
	sw.mu.Lock()
	if sw.children[peer] == child {
		delete(sw.children, peer)
	}
	sw.mu.Unlock()
}

// acceptGateway serves a federation request that arrived on a connection
// Serve accepted, as the first request of session sess: it checks
// admission and the place's consent, answers, and runs this end of the
// gateway until it ends.
func (sw *Switch) acceptGateway(ctx context.Context, conn transport.Conn, sess *Session, req *linkctl.Federate) {
	refuse := func(code uint16, err error) { sw.refuseRequest(ctx, conn, "sion: federation refused", code, err) }
	peer, place, name := req.Switch, req.Place, req.Gateway
	fr := FederationRequest{Place: place, Switch: peer, Gateway: name, Import: req.Import, Export: req.Export, Remote: conn.RemoteAddr(), TLS: tlsState(conn)}
	switch {
	case place == sw.place.Name():
		refuse(codeLinkRefused, fmt.Errorf("%w: the federation request came from this switch's own place %q", ErrLinkRefused, place))
		return
	case !fr.Import && !fr.Export:
		refuse(codeProtocol, fmt.Errorf("%w: a federation request with neither direction", ErrProtocol))
		return
	}
	if admit := sw.place.cfg.Admit; admit != nil {
		ar := AdmissionRequest{Place: sw.place.Name(), Switch: sw.cfg.Name, Session: name, Gateway: true, Remote: fr.Remote, TLS: fr.TLS}
		if err := admit(ctx, ar); err != nil {
			refuse(codeNotAdmitted, fmt.Errorf("%w: gateway %q from place %q: %w", ErrNotAdmitted, name, place, err))
			return
		}
	}
	approve := sw.place.cfg.Federation
	if approve == nil {
		refuse(codeNotAdmitted, fmt.Errorf("%w: place %q accepts no federation requests (PlaceConfig.Federation is nil); gateway %q from place %q", ErrNotAdmitted, sw.place.Name(), name, place))
		return
	}
	if err := approve(ctx, fr); err != nil {
		refuse(codeNotAdmitted, fmt.Errorf("%w: place %q refused gateway %q from place %q: %w", ErrNotAdmitted, sw.place.Name(), name, place, err))
		return
	}
	// A gateway re-established after a failure this side has not noticed
	// yet replaces its stale end.
	for _, r := range sw.gatewayRouters() {
		if ge := gatewayOf(r); !ge.requested() && ge.name == name && ge.peerPlace == place {
			r.close()
			<-r.finished
		}
	}
	end := &gatewayEnd{name: name, peerPlace: place, in: fr.Export, out: fr.Import}
	end.cnt = sw.acceptedCounters(name, place)
	r, linkCtx := sw.newRouter(ctx, conn, peer, false, sess, end)
	r.sendAccept()
	if sw.isClosed() {
		r.close()
		return
	}
	r.start(linkCtx)
	sw.log.Info("sion: gateway accepted", "switch", sw.cfg.Name, "gateway", name, "place", place, "remote", conn.RemoteAddr())
	<-r.finished
}
