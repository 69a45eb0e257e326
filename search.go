package sion

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/sion-go/sion/ontology"
)

// Need is what an event-place search looks for (S1: the "entity property
// that meets its own needs"). Every field given must hold of an entity for
// it to answer: its name, nickname and group equal, and each attribute
// present with that value. Place, when set, is the place the search means
// to reach: it ends once the entity has joined Place through an answering
// entity that belongs to it. At least one field must be set.
type Need struct {
	Name, Nickname, Group string
	Attributes            map[string]string
	Place                 string
}

// address returns the identifier a discovery event for n is addressed to
// (the advertised identifier it routes by): the name (unicast), else an
// attribute (multicast; the first by key), group, nickname, else Place.
func (n Need) address() string {
	switch {
	case n.Name != "":
		return "name:" + n.Name
	case len(n.Attributes) > 0:
		k := slices.Sorted(maps.Keys(n.Attributes))[0]
		return "attr:" + k + "=" + n.Attributes[k]
	case n.Group != "":
		return "group:" + n.Group
	case n.Nickname != "":
		return "nickname:" + n.Nickname
	}
	return "place:" + n.Place
}

// matches reports whether an entity with info's properties meets n (Place
// aside: it is where the search goes, not who answers — unless it is all
// n asks).
func (n Need) matches(info EntityInfo) bool {
	switch {
	case n.Name != "" && n.Name != info.Name,
		n.Nickname != "" && n.Nickname != info.Nickname,
		n.Group != "" && n.Group != info.Group:
		return false
	}
	for k, v := range n.Attributes {
		if got, ok := info.Attributes[k]; !ok || got != v {
			return false
		}
	}
	if n.Name == "" && n.Nickname == "" && n.Group == "" && len(n.Attributes) == 0 {
		return slices.Contains(info.Places, n.Place)
	}
	return true
}

// SearchOptions tune Entity.Search; the zero value means the defaults.
type SearchOptions struct {
	// Hops is the most places the search joins beyond the ones the entity
	// belongs to when it starts (S1 hop budget); default 4.
	Hops int
	// Wait is how long each round collects answers after sending its
	// discovery event; default 500 ms.
	Wait time.Duration
	// TTL is the hop limit of the discovery events in each place; 0 means
	// the place's TTL. Both it and the answering entities' AdvertiseTTL
	// bound how far a search sees (S1): a discovery event that reaches an
	// entity within its own TTL goes on along the filters installed
	// there, so to keep a search near, bound the event's TTL too.
	TTL int
}

// EntityInfo is what an entity tells about itself in an answer: its
// properties, and for each place it belongs to the address its switch
// there can be linked at from the searching entity.
type EntityInfo struct {
	Name       string            `json:"name"`
	Nickname   string            `json:"nickname,omitempty"`
	Group      string            `json:"group,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// Places are the places it belongs to, sorted; Addrs the address of
	// its switch in each (a place is missing when no address of it is
	// reachable from the seeker).
	Places []string          `json:"places"`
	Addrs  map[string]string `json:"addrs"`
}

// SearchHop is one place a search joined: the place the answer came from,
// the place joined, and through which entity at which address.
type SearchHop struct {
	From, Place, Through, Addr string
}

// SearchResult is the outcome of a search.
type SearchResult struct {
	// Met reports whether the need was met; Found is then the entity
	// that met it, and Place the place reached: Need.Place, or else the
	// first of Found's places the entity did not belong to (the place the
	// search was in when Found belongs to no other).
	Met   bool
	Found EntityInfo
	Place string
	// Path lists the places joined, in order; Rounds the discovery
	// events sent (one per place searched); Answers the answers received.
	Path            []SearchHop
	Rounds, Answers int
	// Elapsed is how long the search took.
	Elapsed time.Duration
}

// String formats the path, e.g. "base → alpha (through e3) → beta
// (through e12)".
func (r SearchResult) String() string {
	var b strings.Builder
	if len(r.Path) > 0 {
		b.WriteString(r.Path[0].From)
	}
	for _, h := range r.Path {
		fmt.Fprintf(&b, " → %s (through %s at %s)", h.Place, h.Through, h.Addr)
	}
	return b.String()
}

// discoveryMsg is the payload of a discovery event.
type discoveryMsg struct {
	Seeker string `json:"seeker"`
	Need   Need   `json:"need"`
	// Reply is the seeker's address as the place's peers see it, so an
	// answer gives addresses reachable from there ("" when unknown).
	Reply string `json:"reply,omitempty"`
}

// Search looks for event places that meet need (S1 event-place search):
// it publishes a discovery event addressed to need's identifier in the
// base place (and the other places the entity already belongs to);
// entities whose properties meet need answer with their places and
// addresses; it then joins, through an answering entity, need.Place if
// that entity belongs to it (done), or else each place of theirs it does
// not belong to yet, and searches there in turn — reaching places that no
// discovery event from the base place could — until need is met or
// opts.Hops places were joined. Without need.Place, the first answering
// entity meets it, and the search joins that entity's places.
//
// Search waits until the entity is Active. The places joined stay joined;
// the result lists them, in order, with the entity each was joined
// through. It returns the result with Met false (and a nil error) when
// the budget runs out or no entity answers; an error for a need with no
// field (ErrInvalidConfig), ctx's end, or the entity's close (ErrClosed).
// Safe for concurrent use; concurrent searches may join the same places.
func (e *Entity) Search(ctx context.Context, need Need, opts SearchOptions) (SearchResult, error) {
	start := time.Now()
	var res SearchResult
	if need.Name == "" && need.Nickname == "" && need.Group == "" && len(need.Attributes) == 0 && need.Place == "" {
		return res, fmt.Errorf("%w: Search with an empty Need", ErrInvalidConfig)
	}
	if opts.Hops <= 0 {
		opts.Hops = 4
	}
	if opts.Wait <= 0 {
		opts.Wait = 500 * time.Millisecond
	}
	if err := e.WaitState(ctx, Active); err != nil {
		return res, err
	}
	if need.Place != "" && e.member(need.Place) != nil && need.matches(EntityInfo{Places: []string{need.Place}}) {
		res.Met, res.Place = true, need.Place
		return res, nil
	}
	visited := map[string]bool{}
	frontier := []string{e.cfg.BasePlace}
	for _, p := range e.Places() {
		if p != e.cfg.BasePlace {
			frontier = append(frontier, p)
		}
	}
	for _, p := range frontier {
		visited[p] = true
	}
	joined := 0
	for len(frontier) > 0 {
		place := frontier[0]
		frontier = frontier[1:]
		answers, err := e.searchRound(ctx, place, need, opts)
		res.Rounds++
		res.Answers += len(answers)
		if err != nil {
			res.Elapsed = time.Since(start)
			return res, err
		}
		for _, a := range answers {
			target := need.Place
			if target == "" { // the first of its places the entity did not belong to, else this one
				target = place
				for _, p := range a.Places {
					if !visited[p] && e.member(p) == nil {
						target = p
						break
					}
				}
			}
			if need.Place != "" && !slices.Contains(a.Places, need.Place) {
				continue
			}
			places := []string{target}
			if need.Place == "" {
				places = a.Places
			}
			for _, p := range places {
				if err := e.joinThrough(ctx, place, p, a, &res); err != nil && p == target {
					e.log.Info("sion: search cannot join", "entity", e.cfg.Name, "place", p, "through", a.Name, "err", err)
				}
			}
			if e.member(target) != nil {
				res.Met, res.Found, res.Place = true, a, target
				res.Elapsed = time.Since(start)
				return res, nil
			}
		}
		for _, a := range answers {
			for _, p := range a.Places {
				if visited[p] || joined >= opts.Hops {
					continue
				}
				visited[p] = true
				if e.joinThrough(ctx, place, p, a, &res) == nil {
					joined++
					frontier = append(frontier, p)
				}
			}
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// joinThrough joins place p through answering entity a (found in place
// from), unless the entity belongs to p already.
func (e *Entity) joinThrough(ctx context.Context, from, p string, a EntityInfo, res *SearchResult) error {
	if e.member(p) != nil {
		return nil
	}
	addr := a.Addrs[p]
	if addr == "" {
		return fmt.Errorf("entity %q gave no reachable address in place %q", a.Name, p)
	}
	m, err := e.join(p)
	if err != nil {
		return err
	}
	if err := e.linkTo(ctx, m, addr, a.Name); err != nil {
		e.leave(p)
		return err
	}
	res.Path = append(res.Path, SearchHop{From: from, Place: p, Through: a.Name, Addr: addr})
	return nil
}

// leave closes the entity's switch in place p (a join that failed).
func (e *Entity) leave(p string) {
	e.mu.Lock()
	m := e.places[p]
	delete(e.places, p)
	e.mu.Unlock()
	if m != nil {
		m.sw.Close()
		<-m.serve
		e.advertiseAll()
	}
}

// searchRound publishes one discovery event for need in place and
// returns the answers that meet it, received within opts.Wait, one per
// entity, in order of arrival.
func (e *Entity) searchRound(ctx context.Context, place string, need Need, opts SearchOptions) ([]EntityInfo, error) {
	m := e.member(place)
	if m == nil {
		return nil, fmt.Errorf("%w: entity %q left place %q", ErrClosed, e.cfg.Name, place)
	}
	id := fmt.Sprintf("%016x", random64())
	ch := make(chan EntityInfo, 64)
	e.mu.Lock()
	e.searches[id] = ch
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.searches, id)
		e.mu.Unlock()
	}()
	data, _ := json.Marshal(discoveryMsg{Seeker: e.cfg.Name, Need: need, Reply: e.seekerAddr(m)})
	ev := &Event{Type: ontology.DiscoveryType, ContentType: "application/json", Data: data, Attrs: []ontology.Attr{
		{Name: ontology.AddressAttr, Value: ontology.String(need.address())},
		{Name: ontology.SearchAttr, Value: ontology.String(id)},
	}}
	ev.Control.TTL = opts.TTL
	if err := m.sw.inject(ctx, nil, ev, admitControl); err != nil {
		return nil, err
	}
	e.stats.discoverySent.Add(1)
	t := time.NewTimer(opts.Wait)
	defer t.Stop()
	var out []EntityInfo
	seen := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-e.stop:
			return out, fmt.Errorf("%w: entity %q", ErrClosed, e.cfg.Name)
		case <-t.C:
			return out, nil
		case a := <-ch:
			if !seen[a.Name] && a.Name != e.cfg.Name && need.matches(a) {
				seen[a.Name] = true
				out = append(out, a)
			}
		}
	}
}

// seekerAddr returns the IP the entity's peers in m's place reach it at
// (AdvertiseHost, a concrete listen host, or the interface facing the
// switch it linked to there), or "" when it cannot tell.
func (e *Entity) seekerAddr(m *member) string {
	var peer netip.Addr
	if l := m.requested(); l != nil {
		if ap, err := netip.ParseAddrPort(l.target()); err == nil {
			peer = ap.Addr()
		}
	}
	host, _, err := net.SplitHostPort(m.l.Addr().String())
	if err != nil {
		return ""
	}
	if h, err := netip.ParseAddr(host); e.cfg.AdvertiseHost == "" && !peer.IsValid() && (err != nil || h.IsUnspecified()) {
		return "" // no better guess than the answerer's own
	}
	ip, err := e.hostFor(host, peer)
	if err != nil {
		return ""
	}
	return ip.String()
}

// discovered handles a discovery event that fired the entity's
// advertisement filter in m's place: it answers a search whose need the
// entity meets, and passes an answer to its own search on.
func (e *Entity) discovered(m *member, ev *Event) {
	search, _ := ev.Value(ontology.SearchAttr)
	if ev.Type == ontology.DiscoveryAnswerType {
		var info EntityInfo
		if err := json.Unmarshal(ev.Data, &info); err != nil {
			e.log.Warn("sion: malformed discovery answer ignored", "entity", e.cfg.Name, "place", m.place.Name(), "err", err)
			return
		}
		e.stats.answersReceived.Add(1)
		e.mu.Lock()
		ch := e.searches[search.Str()]
		e.mu.Unlock()
		if ch != nil {
			select {
			case ch <- info:
			default:
			}
		}
		return
	}
	var d discoveryMsg
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		e.log.Warn("sion: malformed discovery event ignored", "entity", e.cfg.Name, "place", m.place.Name(), "err", err)
		return
	}
	if d.Seeker == e.cfg.Name {
		return
	}
	e.stats.discoveryReceived.Add(1)
	info := e.info(d.Reply)
	if !d.Need.matches(info) {
		return
	}
	data, _ := json.Marshal(info)
	ans := &Event{Type: ontology.DiscoveryAnswerType, ContentType: "application/json", Data: data, Attrs: []ontology.Attr{
		{Name: ontology.AddressAttr, Value: ontology.String("name:" + d.Seeker)},
		{Name: ontology.SearchAttr, Value: search},
	}}
	ctx, cancel := e.closing()
	defer cancel()
	if err := m.sw.inject(ctx, nil, ans, admitControl); err != nil {
		e.log.Warn("sion: discovery answer not sent", "entity", e.cfg.Name, "place", m.place.Name(), "seeker", d.Seeker, "err", err)
		return
	}
	e.stats.answersSent.Add(1)
}

// info returns the entity's properties, with addresses reachable from a
// seeker at IP reply ("" when unknown).
func (e *Entity) info(reply string) EntityInfo {
	peer, _ := netip.ParseAddr(reply)
	info := EntityInfo{Name: e.cfg.Name, Nickname: e.cfg.Nickname, Group: e.cfg.Group, Attributes: e.cfg.Attributes, Addrs: map[string]string{}}
	e.mu.Lock()
	ms := maps.Clone(e.places)
	e.mu.Unlock()
	for p, m := range ms {
		info.Places = append(info.Places, p)
		if a := e.reachableAddr(m.l.Addr().String(), peer); a != "" {
			info.Addrs[p] = a
		}
	}
	slices.Sort(info.Places)
	return info
}
