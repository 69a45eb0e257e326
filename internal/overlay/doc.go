// Package overlay is the structured overlay under S3's rendezvous routing
// (DESIGN.md "Beyond one tree"): switches get IDs on a ring, and a message
// for a key travels switch to switch until it reaches the key's root, the
// live switch whose ID is closest to the key. The rendezvous switch of an
// event type is the root of HashID(type name); advertisements and
// subscriptions are routed toward it.
//
// The package is routing state and decisions only: a Table per switch,
// pure functions, no goroutines, no network, no clock. The caller (the
// switch) carries the join, leave and repair messages on its shared links
// and serialises its calls on a Table. It imports the standard library
// only.
//
// # Why Pastry
//
// The overlay follows Pastry (Rowstron and Druschel, 2001) with digits of
// b = 4 bits, rather than Chord: prefix routing resolves one hex digit per
// hop, so a route takes at most about ⌈log₁₆ N⌉ routing-table hops plus
// one leaf-set hop (the bound the tests assert is ⌈log₁₆ N⌉ + 2), against
// Chord's log₂ N / 2 on average; and a table's content is fixed by ID
// prefixes alone (no network proximity is used), so every switch's
// choices can be checked against brute force. State per switch is
// O(log N): at most 15 nodes in each of about ⌈log₁₆ N⌉ populated rows,
// plus the leaf set.
//
// # IDs
//
// An ID is 128 bits, 32 hex digits, digit 0 the most significant; a
// switch's ID is HashID of its name (SHA-256, first 16 bytes). IDs lie on
// a ring of 2^128 points; Distance is the shorter arc, and Closer orders
// nodes by distance to a key, a tie (two nodes at the same distance on
// both sides of the key) going to the smaller ID, so every key has one
// root.
//
// # Routing
//
// Table.NextHop: if the key lies within the range of the leaf set (the
// L/2 nearest nodes on each side of self), the hop goes to the leaf
// closest to the key, or nowhere when self is the root. Otherwise it goes
// to routing-table row l = SharedPrefix(self, key), column key.Digit(l),
// a node sharing at least l+1 digits with the key. If that cell is empty
// (rare) it goes to the known node closest to the key among those that
// share at least l digits with it and are closer than self.
//
// Routes are loop-free because routing is directed by the key. The
// invariant, asserted on every hop of the tests' simulation: each hop
// strictly increases the number of digits shared with the key (a
// routing-table hop), or strictly decreases the ring distance to the key
// (a leaf-set hop or a rare-case hop). A rare-case hop keeps at least l
// shared digits, so on every hop but a leaf-set hop the pair (shared
// digits, −distance) strictly grows, which can happen only finitely
// often; and with complete leaf sets the leaf-set hop lands on the root,
// which ends the route. While leaf sets await repair, the caller's hop
// limit (its TTL) is the safety net. The tree rule of S1 (each switch
// links to one parent, so links never form a loop) does not hold for
// overlay hops: they follow the overlay's own links, which form a mesh;
// loop-freedom comes from the invariant above, not from the topology.
//
// # Join
//
// A newcomer X knows one member A. A routes a join message toward X's ID;
// each switch on the route, A … Z (Z is X's root), answers X with
// JoinRows(X), its routing-table rows valid for X and itself (Pastry's
// "row i from the i-th node"), and Z also with LeafSetFor(X), its leaf set
// and itself. X Learns all of them. Then X announces itself: it sends its
// state (Nodes and Self) to every node of its state, and each of them
// Learns it, X included.
//
// # Leave
//
// A leaving switch D sends its state (Nodes) to every node in it: each
// Removes D and Learns that state, which gives D's leaf-set neighbours
// their replacements (D's leaf set) and the holders of D's routing-table
// cells candidates for it. Other switches that hold D find out lazily
// (a message to D goes unanswered) and proceed as for a death.
//
// # Repair
//
// When a switch learns that a node died (heartbeats, an unanswered hop),
// it Removes it and keeps a tombstone of it for a while (a caller's
// concern: it drops the ID from what it Learns meanwhile, so a neighbour
// that has not yet noticed cannot bring it back). Then:
//
//   - leaf set: it asks each of RepairContacts (the farthest live leaf on
//     each side that is short) for LeafSetFor(itself), Learns the answers,
//     Removes contacts that do not answer, and repeats while Learn reports
//     a change;
//   - routing table: the lost cell in row r = SharedPrefix(self, dead) is
//     refilled lazily by any later Add with the right prefix, or at once by
//     asking the nodes of Row(r), then of Row(r+1), for their Row(r) and
//     Learning it (Pastry's repair).
//
// # Concurrency
//
// A Table is not safe for concurrent use; the caller holds a lock around
// every call. The package has no other state.
package overlay
