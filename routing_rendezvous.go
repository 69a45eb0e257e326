package sion

import (
	"context"

	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/overlay"
	"github.com/sion-go/sion/internal/traffic"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// RendezvousConfig configures rendezvous routing (S3); see
// RouteByRendezvous. The zero value means the defaults.
type RendezvousConfig struct {
	// Classes names, per event type, the attributes that identify S3's
	// event classes below the type: First the first-level attribute
	// (level 2, S3's Place = "YokohamaStation"), Leaf the lowest-level
	// one (level 3, S3's GlobalPosition data ID). The rendezvous switch
	// of a type measures traffic per type, per (type, First value) and
	// per (type, Leaf value); a type not listed is measured per type
	// only. A type's subtypes use its entry unless they have their own.
	// NewEventPlace refuses a type the ontology does not know or an
	// attribute outside the type's vocabulary.
	Classes map[string]ClassLevels
	// Window is how far back the traffic rates look (a sliding window of
	// ten buckets); 0 means DefaultTrafficWindow.
	Window time.Duration
	// Threshold is the load, in events per second over the window, above
	// which a rendezvous switch takes its hottest classes off itself with
	// bypasses from each class's merge point to its branch point (S3 load
	// distribution): it looks a tenth of a window at a time and, above
	// the threshold, starts as many bypasses at once as it takes to bring
	// the load minus the bypassed classes' under it, then waits a window
	// before it looks again; 0 means never.
	Threshold float64
	// BypassLevel is the level whose hottest class is bypassed: 2 (the
	// type and its first-level attribute, S3's first embodiment; 0 means
	// 2) or 3 (the lowest-level attribute, its second).
	BypassLevel int
	// Release ends a bypass whose class's rate at the merge point has been
	// below it, in events per second, for a window (hysteresis: keep it
	// well below Threshold); 0 means a bypass ends only when its path
	// changes.
	Release float64
	// IDs, when set, gives the switches it names these overlay IDs instead
	// of the hashes of their names: to put the rendezvous switch of a type
	// on a chosen switch (give it OverlayKey of the type's name), or to
	// reproduce a given overlay. Every ID must be
	// distinct, and every switch of the place must use the same IDs.
	IDs map[string][16]byte
	// Neighbours, when set, limits the switches each switch takes into
	// its routing table and leaf set to those listed for it by name (a
	// switch not listed takes in none but those that link to it for a
	// bypass). It reproduces a given overlay — S3's Fig. 2 — or keeps
	// tables within sites; the overlay then routes a key to the closest
	// switch reachable through those tables, so one rendezvous switch per
	// type, and the hop bound, hold only when the lists let every switch
	// reach the switch closest to each key. nil: no limit (Pastry).
	Neighbours map[string][]string
	// Leaves is the size of each switch's leaf set, the overlay nodes
	// nearest to it on the ring (half on each side); 0 means 16
	// (Pastry's L for 4-bit digits).
	Leaves int
	// Clock, when set, is the time traffic is measured and bypasses are
	// decided by: the traffic windows, Release's hysteresis, a refused
	// bypass's hold, and RendezvousInfo's rates. nil means time.Now. A
	// switch still looks a tenth of a Window of real time at a time (a
	// ticker) and reads Clock then. A simulation or a test sets a clock
	// it advances itself, so that S3's rates do not depend on how fast
	// the machine publishes; it must be safe for concurrent use and
	// never go back. Overlay timers (dials, departed nodes) keep real
	// time.
	Clock func() time.Time
}

// ClassLevels names the attributes of an event type's level-2 and
// level-3 classes (S3 identification hierarchy); see
// RendezvousConfig.Classes. Either may be "".
type ClassLevels struct {
	First, Leaf string
}

// DefaultTrafficWindow is the sliding window of a rendezvous switch's
// traffic rates when RendezvousConfig.Window is 0.
const DefaultTrafficWindow = 10 * time.Second

// RouteByRendezvous returns rendezvous routing over a structured overlay
// (S3, after Hermes), configured by cfg, for PlaceConfig.Routing.
//
// The switches of the place form a Pastry-style overlay (Switch.Join): each
// has a 128-bit ID, the first 16 bytes of the SHA-256 of its name, a
// routing table of 32 rows of 16 (one row per shared hexadecimal digit)
// and a leaf set; a key is routed to the live switch whose ID is
// numerically closest to it in at most ⌈log₁₆ N⌉ + 2 hops for N switches,
// each switch holding O(log N) entries. Overlay neighbours are joined by
// shared links (admission applies), which need not form a tree: loops
// cannot form because each hop moves strictly closer to the key.
//
// The rendezvous switch of an event type is the one closest to the hash
// of the type's name. Advertisements (Session.Advertise) and subscriptions
// travel hop by hop toward the rendezvous switch of each of their types —
// a subscription to a type toward that of the type and of each subtype —
// and each switch on the way keeps them: the advertisement table (type,
// attribute detail, sources, next hop) and the request table (the proxy
// filters of its links, whose peers are the next hops toward subscribers).
// Events of a type follow the advertisement paths to its rendezvous switch
// and the request paths from there, and take a short cut where a request
// path meets an advertisement path before it; each switch matches them by
// the same filter.Index. A publish of a type the session has not
// advertised is refused (ErrNotAdvertised).
//
// The subscription contract (S2) holds: Subscribe returns once the
// request tables up to the rendezvous switches have the filter, and an
// advertisement once the advertisement tables up to them have it. A
// subscription's TTL (WithTTL) bounds its hops toward the rendezvous
// switch, as the place's TTL bounds an event's: keep them above twice the
// overlay's route length (16, the default, serves thousands of switches).
//
// Trust: overlay links are admitted like shared links (PlaceConfig.Admit
// sees AdmissionRequest.Link, SharedKey applies), and an admitted switch
// is trusted with the place's routing. A switch can choose a name whose
// hash lies close to an event type's key and so become that type's
// rendezvous switch (it takes about as many tries as there are
// switches), and a switch on a path can drop what crosses it. Admit
// switches separately from sessions: the Admit hook sees an overlay link
// with AdmissionRequest.Link set and the switch's name as Session, so it
// can admit only the switches you run (with their IDs pinned in
// RendezvousConfig.IDs if names must not choose keys).
// What a neighbour can no longer do: claim an ID that is not its name's,
// put a node that does not answer as its ID says into another switch's
// table (a node enters a table only once its link is up), answer leaf-set
// requests it was not asked, start or end a bypass from off its path, or
// advertise outside the ontology.
//
// Choose it over the S1 modes when a place grows to hundreds of switches:
// S1 propagation spreads every subscription to every switch within its
// TTL, here each switch holds only the paths through it. The price is the
// rendezvous switch, which every event of its type crosses.
func RouteByRendezvous(cfg RendezvousConfig) Routing {
	rv := &rendezvous{cfg: cfg}
	if len(cfg.IDs) > 0 {
		rv.pinned = map[string]overlay.ID{}
		for name, id := range cfg.IDs {
			rv.pinned[name] = id
		}
	}
	if cfg.Neighbours != nil {
		names := map[overlay.ID]string{}
		for name, id := range rv.pinned {
			names[id] = name
		}
		rv.allow = func(self, other overlay.ID) bool {
			return slices.Contains(cfg.Neighbours[rv.nameOf(names, self)], rv.nameOf(names, other))
		}
	}
	return rv
}

// OverlayKey returns the overlay key of event type name (S3): the
// rendezvous switch of the type is the live switch whose ID is closest to
// it. It is the first 16 bytes of the SHA-256 of the name, as a switch's
// ID is of its name (RendezvousConfig.IDs).
func OverlayKey(name string) [16]byte { return overlay.HashID(name) }

// rendezvous is S3's routing (RouteByRendezvous): the configuration the
// place's switches share; each switch's state is its rvSwitch.
type rendezvous struct {
	cfg RendezvousConfig
	// pinned gives switches IDs other than the hash of their names
	// (RendezvousConfig.IDs), and allow, when set, limits which nodes a
	// switch's table takes in (RendezvousConfig.Neighbours).
	pinned map[string]overlay.ID
	allow  func(self, other overlay.ID) bool

	mu    sync.Mutex
	names map[overlay.ID]string // mu; the names of the IDs hashed so far, for allow
}

// nameOf returns the name of the switch with ID id: a pinned one's, or
// one whose hash idOf has computed.
func (rv *rendezvous) nameOf(pinned map[overlay.ID]string, id overlay.ID) string {
	if n, ok := pinned[id]; ok {
		return n
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.names[id]
}

func (*rendezvous) String() string { return "rendezvous" }

// check validates the configuration against the place's ontology
// (NewEventPlace).
func (rv *rendezvous) check(o *ontology.Ontology) error {
	switch c := rv.cfg; {
	case c.Window < 0 || c.Leaves < 0 || c.Threshold < 0 || c.Release < 0:
		return fmt.Errorf("RendezvousConfig.Window %v, Leaves %d, Threshold %v and Release %v must not be negative", c.Window, c.Leaves, c.Threshold, c.Release)
	case c.BypassLevel != 0 && c.BypassLevel != 2 && c.BypassLevel != 3:
		return fmt.Errorf("RendezvousConfig.BypassLevel is %d; it is 2 or 3 (0 means 2)", c.BypassLevel)
	case c.Window > 0 && c.Window < 10*time.Millisecond:
		return fmt.Errorf("RendezvousConfig.Window %v is below 10ms", c.Window)
	}
	seen := map[[16]byte]string{}
	for name, id := range rv.cfg.IDs {
		if other, dup := seen[id]; dup {
			return fmt.Errorf("RendezvousConfig.IDs: switches %q and %q have the same ID %x", min(name, other), max(name, other), id)
		}
		seen[id] = name
	}
	for name, lv := range rv.cfg.Classes {
		t, ok := o.Lookup(name)
		if !ok {
			return fmt.Errorf("RendezvousConfig.Classes: event type %q is not in the ontology", name)
		}
		for _, a := range []string{lv.First, lv.Leaf} {
			if a == "" {
				continue
			}
			if _, ok := o.Attribute(t.ID, a); !ok {
				return fmt.Errorf("RendezvousConfig.Classes[%q]: attribute %q is not in the type's vocabulary", name, a)
			}
		}
	}
	return nil
}

// idOf returns the overlay ID of the switch named name.
func (rv *rendezvous) idOf(name string) overlay.ID {
	if id, ok := rv.pinned[name]; ok {
		return id
	}
	id := overlay.HashID(name)
	if rv.allow != nil {
		rv.mu.Lock()
		if rv.names == nil {
			rv.names = map[overlay.ID]string{}
		}
		rv.names[id] = name
		rv.mu.Unlock()
	}
	return id
}

// levels returns the class attributes of event type t: its own entry, or
// else an ancestor's (the first by type ID).
func (rv *rendezvous) levels(o *ontology.Ontology, t string) ClassLevels {
	if lv, ok := rv.cfg.Classes[t]; ok {
		return lv
	}
	et, ok := o.Lookup(t)
	if !ok {
		return ClassLevels{}
	}
	for _, a := range o.Ancestors(et.ID) {
		if lv, ok := rv.cfg.Classes[o.Type(a).Name]; ok {
			return lv
		}
	}
	return ClassLevels{}
}

func (rv *rendezvous) attach(sw *Switch) switchRouting {
	window := rv.cfg.Window
	if window == 0 {
		window = DefaultTrafficWindow
	}
	s := &rvSwitch{
		rv: rv, sw: sw,
		table:   overlay.NewTable(overlay.Node{ID: rv.idOf(sw.cfg.Name)}, rv.cfg.Leaves),
		peers:   map[overlay.ID]*router{},
		links:   map[*router]overlay.Node{},
		dialing: map[overlay.ID]*overlayLink{},
		reqs:    map[*requester]struct{}{},
		tombs:   map[overlay.ID]time.Time{},
		asked:   map[*router]int{},
		adverts: map[advKey]*advEntry{},
		inKeys:  map[*router]map[uint64]advKey{},
		sessAds: map[*Session][]advKey{},
		meter:   traffic.New(traffic.Config{Window: window}),

		bypassMeter: traffic.New(traffic.Config{Window: window}),
		rvRoles:     map[linkctl.ClassRef]*rvRole{},
		paths:       map[linkctl.ClassRef]*pathRole{},
		refused:     map[linkctl.ClassRef]time.Time{},
		classVals:   map[linkctl.ClassRef]ontology.Value{},
	}
	return s
}

// rvSwitch is one switch's part of rendezvous routing (S3): its overlay
// table and links, its advertisement table, and the traffic meter it
// keeps as a rendezvous switch. Its request table is the proxy filters
// of its overlay links. Safe for concurrent use.
type rvSwitch struct {
	rv *rendezvous
	sw *Switch
	wg sync.WaitGroup // dials and the supervisors of the links they made

	mu      sync.Mutex
	tr      transport.Transport           // mu; what Join dials with
	joined  bool                          // mu; Join ran
	left    bool                          // mu; Leave or Close ran
	table   *overlay.Table                // mu; self's Addr is set by Join
	peers   map[overlay.ID]*router        // mu; the link used toward each node
	links   map[*router]overlay.Node      // mu; every overlay link up, and its peer's node
	dialing map[overlay.ID]*overlayLink   // mu; links being dialled
	reqs    map[*requester]struct{}       // mu; the requesters of links this switch dialled, until they end
	tombs   map[overlay.ID]time.Time      // mu; nodes found dead, not re-learned until then
	asked   map[*router]int               // mu; leaf-set requests sent and not answered, per link
	replies chan []overlay.Node           // mu; a Join waiting for its JoinReply (rows and leaves)
	adverts map[advKey]*advEntry          // routeMu, then mu; the advertisement table
	inKeys  map[*router]map[uint64]advKey // mu; the peers' advertisement keys, by link
	sessAds map[*Session][]advKey         // mu; the entries local sessions' advertisements made
	nextKey uint64                        // mu; the last key given to an Advertise sent
	kicks   chan struct{}                 // mu (made once); wakes the rerouter
	stop    chan struct{}                 // mu (made once); closed by close: the rerouter returns

	meter       *traffic.Meter // traffic per event class of the types this switch is the rendezvous of
	bypassMeter *traffic.Meter // traffic per event class this switch sends over bypasses, as a merge point

	// The bypass (bypass.go): the rules events read, and the roles this
	// switch has in bypasses, by class (Switch.routeMu, then mu).
	bypass    atomic.Pointer[bypassTable]
	rvRoles   map[linkctl.ClassRef]*rvRole        // mu; as the rendezvous switch
	paths     map[linkctl.ClassRef]*pathRole      // mu; as a switch on a bypass's path, the branch or the merge point
	refused   map[linkctl.ClassRef]time.Time      // mu; classes that could not be bypassed, not tried until then
	classVals map[linkctl.ClassRef]ontology.Value // mu; the typed values of the classes metered
	seq       uint64                              // mu; the last path change's number
	calm      time.Time                           // mu; no bypass starts before then
}

// now returns the time of traffic and bypasses: RendezvousConfig.Clock's,
// or time.Now.
func (s *rvSwitch) now() time.Time {
	if c := s.rv.cfg.Clock; c != nil {
		return c()
	}
	return time.Now()
}

// keys registers sub, once per event type it covers, over r when r's peer
// is the next hop toward that type's rendezvous switch: the filter
// narrowed to that type (r's end forwards an event only under a filter of
// its exact type, so each type's paths stay a tree). A proxy filter
// registered for an advertisement (TTL 0) goes nowhere further.
func (s *rvSwitch) keys(r *router, sub *Subscription, reg func(routeKey, int)) {
	if sub.ttl < 1 || r.sess == sub.sess {
		return
	}
	types := s.typesOf(sub.f.Type())
	s.mu.Lock()
	if _, ok := s.links[r]; !ok {
		s.mu.Unlock()
		return
	}
	var via []string
	for _, t := range types {
		if s.nextHop(t) == r {
			via = append(via, t)
		}
	}
	s.mu.Unlock()
	for _, t := range via {
		reg(narrowKey(sub, t), sub.ttl-1)
	}
}

// narrowKey returns sub's key narrowed to event type t (a subtype of its
// filter's type, or that type).
func narrowKey(sub *Subscription, t string) routeKey {
	if sub.f.Type() == t {
		return newRouteKey(sub.f.String(), sub.places)
	}
	spec := sub.f.Spec()
	spec.Type = t
	return newRouteKey(filter.MustBuild(spec).String(), sub.places)
}

// typesOf returns the event types a filter or advertisement on type t
// covers: t and its descendants, or every type the ontology has but the
// reserved ones for "*".
func (s *rvSwitch) typesOf(t string) []string {
	o := s.sw.place.Ontology()
	var out []string
	if t == filter.AnyType {
		for id := range o.NumTypes() {
			if name := o.Type(id).Name; !ontology.IsReserved(name) {
				out = append(out, name)
			}
		}
		return out
	}
	et, ok := o.Lookup(t)
	if !ok {
		return nil
	}
	for _, id := range o.Descendants(et.ID) {
		out = append(out, o.Type(id).Name)
	}
	return out
}

// nextHop returns the link toward the rendezvous switch of event type t,
// or nil when this switch is it (or has no link there yet). mu must be
// held.
func (s *rvSwitch) nextHop(t string) *router {
	n, ok := s.table.NextHop(overlay.HashID(t))
	if !ok {
		return nil
	}
	return s.peers[n.ID]
}

// tableAdd adds n to the table (overlay.Table.Add) unless a test's allow
// keeps it out. mu must be held.
func (s *rvSwitch) tableAdd(n overlay.Node) bool {
	if s.rv.allow != nil && !s.rv.allow(s.table.Self().ID, n.ID) {
		return false
	}
	return s.table.Add(n)
}

// isRendezvous reports whether this switch is the rendezvous switch of
// event type t now. mu must be held.
func (s *rvSwitch) isRendezvous(t string) bool {
	_, ok := s.table.NextHop(overlay.HashID(t))
	return !ok
}

// close ends the overlay: its dials and the links this switch requested
// (accepted ones end with Serve), and waits for them. Idempotent.
func (s *rvSwitch) close() {
	s.mu.Lock()
	s.left = true
	if s.stop != nil && !chanClosed(s.stop) {
		close(s.stop)
	}
	reqs := make([]*requester, 0, len(s.reqs))
	for q := range s.reqs {
		reqs = append(reqs, q)
	}
	s.mu.Unlock()
	for _, q := range reqs {
		q.cancel()
	}
	s.wg.Wait()
}

// unrouted has nothing to do: what a subscription registered is released
// by Switch.routeRemove.
func (*rvSwitch) unrouted(*Subscription) {}

// matched records the bypass rules the event's links are chosen by
// (bypass.go): read after its match and before it leaves the switch's
// matching, so that the rules it reads agree with the filters it matched.
func (s *rvSwitch) matched(shared *eventFrames) { shared.bypass = s.bypass.Load() }

// linkControl carries nothing: the overlay end handles the rendezvous
// routing's own messages.
func (*rvSwitch) linkControl(*router, linkctl.Message) (bool, error) { return false, nil }

// acceptAgent refuses: a place routed by rendezvous has no agent.
func (*rvSwitch) acceptAgent(ctx context.Context, conn transport.Conn, sess *Session, _ *linkctl.Manage) {
	refuseAgent(ctx, conn, sess)
}
