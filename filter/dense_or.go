package filter

import (
	"math/bits"
	"sync/atomic"
)

// The ORs of a dense engine's match (dense_match.go): u, one bit per
// slot, gathers the slots the event fails; every bitset is read word by
// word beside it. Every word but u's last is read plainly: the writer
// only ever merges into the word of the last slot it published, and the
// words before it were written before the count the Match loaded (see
// dense). The last word is read atomically, and so is every word of the
// live bitset, which Remove changes anywhere.

// orFirst returns u, for a Match that saw n slots published, set to the
// slots that are not live or are past n, ORed with the bitsets
// srcs[order[…]], and how many slots it leaves unmarked. It reads and
// writes each word of u once for every eight bitsets, not once per
// bitset (see orFullFirst): chunk by chunk of u, the first eight with
// the live bitset in one pass, then eight more at a time while the
// chunk is in cache. While no filter has been removed from g (holes),
// every slot below n is live, and the live bitset is not read: one
// bitset fewer from memory per event (W-INT at 10⁶ filters 0.95–0.96 of
// the CPU per event, at 9·10⁶ 0.94–1.00; in-process alternation, two runs
// of 24 rounds, load 2–4, 2026-12-03). Every bitset covers the n slots.
func (s *scratch) orFirst(g *dgen, n uint32, srcs []bitset, order []uint64) ([]uint64, int) {
	words := int(n+63) >> 6
	if cap(s.u) < words {
		s.u = halfPage(words)
	}
	u := s.u[:words]
	last := words - 1
	left := 0
	holes := g.holes.Load()
	for c, lc := range g.live {
		lo := chunkStart(c) >> 6
		if lo >= last {
			break
		}
		dst := u[lo:last]
		m := min(len(dst), len(lc))
		dst, lc := dst[:m], lc[:m]
		for p := 0; p == 0 || p < len(order); p += 8 {
			var ch [8][]uint64
			for j := range ch {
				if p+j < len(order) {
					ch[j] = srcs[uint32(order[p+j])][c][:m]
				} else {
					ch[j] = zeroChunk[:m]
				}
			}
			switch {
			case p == 0 && !holes:
				or8Set(dst, &ch)
			case p == 0:
				or8Live(dst, lc, &ch)
			default:
				or8(dst, &ch)
			}
		}
		for _, w := range dst {
			left += bits.OnesCount64(^w)
		}
	}
	x := ^atomic.LoadUint64(g.live.word(uint32(last) << 6))
	for _, o := range order {
		x |= atomic.LoadUint64(srcs[uint32(o)].word(uint32(last) << 6))
	}
	if r := n & 63; r != 0 {
		x |= ^uint64(0) << r
	}
	u[last] = x
	return u, left + bits.OnesCount64(^x)
}

// zeroChunk is a chunk of a bitset with no bits set: what orFirst ORs in
// place of bitsets it has fewer than eight of. Never written.
var zeroChunk [1 << (maxChunkShift - 6)]uint64

// or8Live sets dst to the complement of live ORed with the eight bitsets
// of ch, each at least as long as dst.
func or8Live(dst, live []uint64, ch *[8][]uint64) {
	n := len(dst)
	live = live[:n]
	a, b, c, d := ch[0][:n], ch[1][:n], ch[2][:n], ch[3][:n]
	e, f, g, h := ch[4][:n], ch[5][:n], ch[6][:n], ch[7][:n]
	for i := range dst {
		dst[i] = ^atomic.LoadUint64(&live[i]) | a[i] | b[i] | c[i] | d[i] | e[i] | f[i] | g[i] | h[i]
	}
}

// or8Set sets dst to the OR of the eight bitsets of ch, each at least as
// long as dst.
func or8Set(dst []uint64, ch *[8][]uint64) {
	n := len(dst)
	a, b, c, d := ch[0][:n], ch[1][:n], ch[2][:n], ch[3][:n]
	e, f, g, h := ch[4][:n], ch[5][:n], ch[6][:n], ch[7][:n]
	for i := range dst {
		dst[i] = a[i] | b[i] | c[i] | d[i] | e[i] | f[i] | g[i] | h[i]
	}
}

// or8 ORs the eight bitsets of ch, each at least as long as dst, into
// dst.
func or8(dst []uint64, ch *[8][]uint64) {
	n := len(dst)
	a, b, c, d := ch[0][:n], ch[1][:n], ch[2][:n], ch[3][:n]
	e, f, g, h := ch[4][:n], ch[5][:n], ch[6][:n], ch[7][:n]
	for i := range dst {
		dst[i] |= a[i] | b[i] | c[i] | d[i] | e[i] | f[i] | g[i] | h[i]
	}
}

// orWords ORs the bitsets srcs[order[…]] into u word by word of u: each
// word not yet full takes the same word of each bitset in turn until it
// is full. Cost: a pass over u, and a load, scattered, per bitset a word
// takes. Every bitset covers u.
func orWords(u []uint64, srcs []bitset, order []uint64) {
	last := len(u) - 1
	shift := chunkShift - 6 // words per chunk: 1 << shift
	mask := 1<<shift - 1
	for w, x := range u[:last] {
		if x == ^uint64(0) {
			continue
		}
		c, i := w>>shift, w&mask
		for _, o := range order {
			if x |= srcs[uint32(o)][c][i]; x == ^uint64(0) {
				break
			}
		}
		u[w] = x
	}
	for _, o := range order {
		u[last] |= atomic.LoadUint64(srcs[uint32(o)].word(uint32(last) << 6))
	}
}

// alive returns the number of bits of u not set.
func alive(u []uint64) int {
	n := 0
	for _, w := range u {
		n += bits.OnesCount64(^w)
	}
	return n
}

// orBits ORs the engine bitset src into u, of a Match that saw n slots
// published, a cache line at a time skipping full lines of u when lines
// is set. Every word but u's last is read plainly: the writer only ever
// merges into the word of the last slot it published, and the words
// before it were written before the count this Match loaded (see dense).
// The last word is read atomically.
func orBits(u []uint64, src bitset, lines bool) {
	last := len(u) - 1
	body := u[:last]
	for c, ch := range src {
		lo := chunkStart(c) >> 6
		if lo >= len(body) {
			break
		}
		if lines {
			orLines(body[lo:], ch)
		} else {
			orInto(body[lo:], ch)
		}
	}
	u[last] |= atomic.LoadUint64(src.word(uint32(last) << 6))
}

// orCount is orBits skipping full lines, and returns the slots of u left
// unmarked: the ORed lines' bits counted while in registers, so that
// match's rule to stop ORing needs no pass of its own over u.
func orCount(u []uint64, src bitset) int {
	last := len(u) - 1
	body := u[:last]
	left := 0
	for c, ch := range src {
		lo := chunkStart(c) >> 6
		if lo >= len(body) {
			break
		}
		left += orLinesCount(body[lo:], ch)
	}
	u[last] |= atomic.LoadUint64(src.word(uint32(last) << 6))
	return left + bits.OnesCount64(^u[last])
}

// orLinesCount is orLines, returning the bits of dst (as far as src
// goes) left unset.
func orLinesCount(dst, src []uint64) int {
	n := min(len(dst), len(src))
	left := 0
	i := 0
	for ; i+8 <= n; i += 8 {
		d := dst[i : i+8 : i+8]
		if d[0]&d[1]&d[2]&d[3]&d[4]&d[5]&d[6]&d[7] == ^uint64(0) {
			continue
		}
		s := src[i : i+8 : i+8]
		d[0] |= s[0]
		d[1] |= s[1]
		d[2] |= s[2]
		d[3] |= s[3]
		d[4] |= s[4]
		d[5] |= s[5]
		d[6] |= s[6]
		d[7] |= s[7]
		left += bits.OnesCount64(^d[0]) + bits.OnesCount64(^d[1]) + bits.OnesCount64(^d[2]) + bits.OnesCount64(^d[3]) +
			bits.OnesCount64(^d[4]) + bits.OnesCount64(^d[5]) + bits.OnesCount64(^d[6]) + bits.OnesCount64(^d[7])
	}
	for ; i < n; i++ {
		dst[i] |= src[i]
		left += bits.OnesCount64(^dst[i])
	}
	return left
}

// orLines ORs src into dst a cache line (8 words) at a time, skipping the
// lines of dst that are all ones; src may be shorter or longer.
func orLines(dst, src []uint64) {
	n := min(len(dst), len(src))
	i := 0
	for ; i+8 <= n; i += 8 {
		d := dst[i : i+8 : i+8]
		if d[0]&d[1]&d[2]&d[3]&d[4]&d[5]&d[6]&d[7] == ^uint64(0) {
			continue
		}
		s := src[i : i+8 : i+8]
		d[0] |= s[0]
		d[1] |= s[1]
		d[2] |= s[2]
		d[3] |= s[3]
		d[4] |= s[4]
		d[5] |= s[5]
		d[6] |= s[6]
		d[7] |= s[7]
	}
	for ; i < n; i++ {
		dst[i] |= src[i]
	}
}

// orInto ORs src into dst; src may be shorter or longer.
func orInto(dst, src []uint64) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i := range dst {
		dst[i] |= src[i]
	}
}
