package overlay

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
)

// Digits is the number of hex digits of an ID (128 bits / 4), and so the
// number of rows of a routing table (Pastry with b = 4).
const Digits = 32

// Base is the number of values of one digit (2^b with b = 4), and so the
// number of columns of a routing table.
const Base = 16

// ID is a point on the identifier ring of 2^128 points: a switch's ID or a
// key (S3: the hash of an event type's name). It is a 128-bit unsigned
// number, big-endian: ID[0] holds its most significant byte and digits 0
// and 1. The zero ID is a valid point of the ring. An ID is a comparable
// value and can be a map key.
type ID [16]byte

// HashID returns the ID of a name: the first 16 bytes of the SHA-256 of
// name. A switch's ID is HashID of its name, and the key of an event type
// is HashID of the type's name; its rendezvous switch (S3) is the live
// switch whose ID is closest to that key (see Table.Root).
func HashID(name string) ID {
	sum := sha256.Sum256([]byte(name))
	var id ID
	copy(id[:], sum[:16])
	return id
}

// String returns id as 32 lower-case hex digits, most significant first.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Digit returns hex digit i of id, 0 being the most significant one and
// Digits-1 the least significant one; the result is in [0, Base). It
// panics when i is outside [0, Digits).
func (id ID) Digit(i int) int {
	b := id[i/2]
	if i%2 == 0 {
		return int(b >> 4)
	}
	return int(b & 0x0f)
}

// Compare compares a and b as unsigned 128-bit numbers: -1 if a < b, 0 if
// a == b, +1 if a > b. It is the order of Table.Nodes and of the tie-break
// of Closer.
func (a ID) Compare(b ID) int { return a.u().cmp(b.u()) }

// SharedPrefix returns the number of leading hex digits a and b have in
// common, in [0, Digits]; Digits means a == b. A node that shares l digits
// with a table's own ID goes in row l of that table, and Pastry routing
// makes the number a route shares with its key grow.
func SharedPrefix(a, b ID) int {
	hi := a.u().hi ^ b.u().hi
	if hi != 0 {
		return bits.LeadingZeros64(hi) / 4
	}
	lo := a.u().lo ^ b.u().lo
	if lo != 0 {
		return 16 + bits.LeadingZeros64(lo)/4
	}
	return Digits
}

// Distance returns the circular distance between a and b on the ring of
// 2^128 points: the shorter of the two arcs between them, as a 128-bit
// unsigned number in the same big-endian layout as an ID. It is at most
// 2^127 and zero only when a == b. It is symmetric.
func Distance(a, b ID) ID { return ringDist(a.u(), b.u()).id() }

// Closer reports whether a is strictly closer to key than b on the ring
// (by Distance). When a and b are at the same distance from key — they
// lie on both sides of it, at the same distance — the smaller ID (by
// Compare) is the closer one, so that every key has exactly one closest
// node among any set of distinct IDs. Closer(key, a, a) is false.
func Closer(key, a, b ID) bool { return closer(key.u(), a.u(), b.u()) }

// u128 is an ID as a number, for the ring arithmetic.
type u128 struct{ hi, lo uint64 }

func (id ID) u() u128 {
	return u128{binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(id[8:])}
}

func (x u128) id() ID {
	var id ID
	binary.BigEndian.PutUint64(id[:8], x.hi)
	binary.BigEndian.PutUint64(id[8:], x.lo)
	return id
}

func (x u128) cmp(y u128) int {
	switch {
	case x.hi < y.hi:
		return -1
	case x.hi > y.hi:
		return 1
	case x.lo < y.lo:
		return -1
	case x.lo > y.lo:
		return 1
	}
	return 0
}

// sub returns x - y mod 2^128.
func sub(x, y u128) u128 {
	lo, borrow := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, borrow)
	return u128{hi, lo}
}

// addOverflows reports whether x + y >= 2^128.
func addOverflows(x, y u128) bool {
	_, carry := bits.Add64(x.lo, y.lo, 0)
	_, carry = bits.Add64(x.hi, y.hi, carry)
	return carry != 0
}

// cwDist is the clockwise (increasing) distance from x to y: y - x mod 2^128.
func cwDist(x, y u128) u128 { return sub(y, x) }

// ringDist is the shorter of the two arcs between x and y.
func ringDist(x, y u128) u128 {
	d, e := sub(x, y), sub(y, x)
	if d.cmp(e) < 0 {
		return d
	}
	return e
}

func closer(key, a, b u128) bool {
	switch ringDist(key, a).cmp(ringDist(key, b)) {
	case -1:
		return true
	case 1:
		return false
	}
	return a.cmp(b) < 0
}
