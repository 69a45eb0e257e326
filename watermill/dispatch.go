package watermill

import (
	"reflect"
	"time"

	wmessage "github.com/ThreeDotsLabs/watermill/message"

	"github.com/sion-go/sion"
)

// slot is one consumer as the dispatcher sees it: the offer it holds
// (sent, not yet acknowledged) or the one prepared for the head entry.
type slot struct {
	c       *consumer
	holding *offer // sent on c.out, waiting for Ack or Nack
	offered *offer // prepared for the head entry, not yet taken
}

// dispatcher is the state of one topic's dispatch goroutine, which alone
// reads and writes it. It asks the fetch goroutine for an event only when
// nothing waits, so it holds one entry per consumer at most plus one; the
// backlog stays in the sion subscription's queue, where overflow is
// counted.
type dispatcher struct {
	q         *topicQueue
	delay     time.Duration
	toMessage func(ev *sion.Event, subscribed string) *wmessage.Message

	pending []*entry // head first: redeliveries go in front
	slots   []*slot
	asked   bool // fetch is taking an event for us
}

type caseKind int

const (
	caseGone caseKind = iota
	caseAck
	caseNack
	caseSend
)

type caseRef struct {
	slot int
	kind caseKind
}

// The select cases every round begins with.
const (
	caseStop = iota
	caseAttach
	caseWant
	caseFetched
	caseFetchErr
	caseTimer
	numFixed
)

// run hands entries to consumers until stop closes (it returns nil) or
// the subscription ends (it returns Next's error). Each round it selects,
// with reflect.Select, over the fixed cases and, per consumer, its
// context's end and either the Ack and Nack of the message it holds or
// the send of the head entry: one consumer takes each message, and a
// consumer gets its next message only after it settled the last.
func (d *dispatcher) run(stop <-chan struct{}) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var cases []reflect.SelectCase
	var refs []caseRef
	recv := func(ch any) reflect.SelectCase {
		return reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)}
	}
	off := reflect.SelectCase{Dir: reflect.SelectRecv} // a zero Chan: ignored
	for {
		select { // after Close, no message for anyone
		case <-stop:
			return nil
		default:
		}
		for i := len(d.slots) - 1; i >= 0; i-- { // no message for a consumer whose context ended
			select {
			case <-d.slots[i].c.gone:
				d.leave(i)
			default:
			}
		}
		d.q.waiting.Store(int64(len(d.pending)))
		cases, refs = cases[:0], refs[:0]
		cases = append(cases, recv(stop), recv(d.q.attach), off, off, recv(d.q.fetchErr), off)
		switch {
		case d.asked:
			cases[caseFetched] = recv(d.q.fetched)
		case len(d.pending) == 0:
			cases[caseWant] = reflect.SelectCase{Dir: reflect.SelectSend, Chan: reflect.ValueOf(d.q.want), Send: reflect.ValueOf(struct{}{})}
		}
		ready := false
		if len(d.pending) > 0 {
			if wait := time.Until(d.pending[0].notBefore); wait > 0 {
				timer.Reset(wait)
				cases[caseTimer] = recv(timer.C)
			} else {
				ready = true
			}
		}
		for i, sl := range d.slots {
			cases, refs = append(cases, recv(sl.c.gone)), append(refs, caseRef{i, caseGone})
			switch {
			case sl.holding != nil:
				cases = append(cases, recv(sl.holding.msg.Acked()), recv(sl.holding.msg.Nacked()))
				refs = append(refs, caseRef{i, caseAck}, caseRef{i, caseNack})
			case ready:
				head := d.pending[0]
				if sl.offered != nil && sl.offered.e != head {
					sl.offered.cancel()
					sl.offered = nil
				}
				if sl.offered == nil {
					sl.offered = sl.c.offer(head)
				}
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectSend,
					Chan: reflect.ValueOf(sl.c.out), Send: reflect.ValueOf(sl.offered.msg)})
				refs = append(refs, caseRef{i, caseSend})
			}
		}
		chosen, v, _ := reflect.Select(cases)
		timer.Stop()
		switch chosen {
		case caseStop:
			return nil
		case caseAttach:
			d.slots = append(d.slots, &slot{c: v.Interface().(*consumer)})
			continue
		case caseWant:
			d.asked = true
			continue
		case caseFetched:
			d.asked = false
			ev := v.Interface().(sion.Delivery).Event
			d.pending = append(d.pending, &entry{tmpl: d.toMessage(ev, d.q.name)})
			continue
		case caseFetchErr:
			select {
			case <-stop:
				return nil
			default:
				return v.Interface().(error)
			}
		case caseTimer:
			continue
		}
		ref := refs[chosen-numFixed]
		sl := d.slots[ref.slot]
		switch ref.kind {
		case caseGone:
			d.leave(ref.slot)
		case caseAck:
			sl.holding.cancel()
			sl.holding = nil
		case caseNack:
			sl.holding.cancel()
			var at time.Time
			if d.delay > 0 {
				at = time.Now().Add(d.delay)
			}
			d.requeue(sl.holding.e, at)
			sl.holding = nil
		case caseSend:
			sent := d.pending[0]
			d.pending = d.pending[1:]
			sl.holding, sl.offered = sl.offered, nil
			for _, o := range d.slots {
				if o.offered != nil && o.offered.e == sent {
					o.offered.cancel()
					o.offered = nil
				}
			}
		}
	}
}

// leave ends consumer i, whose context ended: the message it holds goes
// back to the head unless it was acknowledged, and its channel closes.
func (d *dispatcher) leave(i int) {
	sl := d.slots[i]
	if h := sl.holding; h != nil {
		h.cancel()
		select {
		case <-h.msg.Acked(): // acknowledged before its consumer ended
		default:
			d.requeue(h.e, time.Time{})
		}
	}
	if sl.offered != nil {
		sl.offered.cancel()
	}
	close(sl.c.out)
	d.slots = append(d.slots[:i], d.slots[i+1:]...)
}

// requeue puts e back at the head of the pending entries, to be offered
// again from at on.
func (d *dispatcher) requeue(e *entry, at time.Time) {
	e.notBefore = at
	d.pending = append([]*entry{e}, d.pending...)
	d.q.redelivered.Add(1)
}

// closeAll cancels the messages held or offered and closes every
// consumer's channel.
func (d *dispatcher) closeAll() {
	for _, sl := range d.slots {
		if sl.holding != nil {
			sl.holding.cancel()
		}
		if sl.offered != nil {
			sl.offered.cancel()
		}
		close(sl.c.out)
	}
	d.slots = nil
	d.q.waiting.Store(int64(len(d.pending)))
}
