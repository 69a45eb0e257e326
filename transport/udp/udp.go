package udp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sion-go/sion/transport"
)

// DefaultMaxDatagramBytes is the datagram size limit, in bytes, of a Conn
// whose Config.MaxDatagramBytes is 0: 1200. A datagram of 1200 bytes, with
// its 8-byte UDP header and a 20-byte IPv4 (or 40-byte IPv6) header, fits
// in the 1280-byte MTU that IPv6 guarantees on every link, and so crosses
// any IPv4 or IPv6 path whole, without fragmentation (QUIC's choice, RFC
// 9000 section 14). A fragmented datagram is lost whenever any of its
// fragments is.
const DefaultMaxDatagramBytes = 1200

// MaxDatagramBytesLimit is the largest Config.MaxDatagramBytes, in bytes:
// 65507, the largest UDP payload in an IPv4 packet (65535 bytes minus a
// 20-byte IPv4 header and an 8-byte UDP header).
const MaxDatagramBytesLimit = 65507

// Config configures a Conn. Its zero value means the defaults: an exclusive
// port and DefaultMaxDatagramBytes.
type Config struct {
	// Shared lets several sockets, in one process or several, bind the
	// same address and port, each with Shared set; every one of them
	// receives each broadcast datagram to that port. A unicast datagram
	// to a shared port reaches only one of them, which one the system
	// chooses, so a responder should answer a probe at the sender's own
	// address (the one Recv returns), which is not shared.
	//
	// Shared sets SO_REUSEADDR and, on Linux, macOS and the BSDs,
	// SO_REUSEPORT, so on Linux the sockets must belong to one user. On
	// Windows, Solaris, illumos and AIX it sets SO_REUSEADDR only, which
	// on Windows also lets a socket with Shared take over a port that one
	// without it holds. On js, wasip1 and Plan 9, Listen with Shared
	// fails with an error wrapping errors.ErrUnsupported. A socket hears
	// broadcasts only if bound to 0.0.0.0 (see the package doc,
	// Broadcast).
	Shared bool

	// MaxDatagramBytes is the largest datagram, in bytes, that the Conn
	// sends and receives; 0 means DefaultMaxDatagramBytes. Listen returns
	// an error for a negative value or one over MaxDatagramBytesLimit.
	MaxDatagramBytes int
}

// Conn is a UDP socket over IPv4; it implements transport.PacketConn.
// Listen returns one.
//
// Recv reads into a buffer of MaxDatagramBytes+1 bytes, so a longer
// datagram is recognised and dropped (Recv returns ErrDatagramTooLarge)
// rather than truncated, and copies each datagram into a new slice.
// Concurrent Recvs take turns: each waits for the ones before it to
// return, though its ctx or Close still ends the wait. So do the writes
// of concurrent Sends, which hold the socket only while the system takes
// the datagram, and Broadcasts, which take a turn per address.
//
// A Conn is safe for concurrent use by multiple goroutines. Close
// unblocks every pending call.
type Conn struct {
	uc    *net.UDPConn
	limit int // MaxDatagramBytes
	local netip.AddrPort

	closed    atomic.Bool
	done      chan struct{} // closed by Close
	closeOnce sync.Once

	// rturn is a lock that serializes Recvs, and that a Recv waits for
	// within its ctx: a Recv sends to it to take its turn and receives
	// from it to end the turn. The Recv whose turn it is owns buf and the
	// socket's read deadline.
	rturn chan struct{}
	buf   []byte // MaxDatagramBytes+1 bytes

	// wturn is to writes (of Send and Broadcast) what rturn is to
	// Recvs; the write whose turn it is owns the socket's write deadline.
	wturn chan struct{}
}

var _ transport.PacketConn = (*Conn)(nil)

// errClosed is the error of a call on a closed Conn.
var errClosed = fmt.Errorf("udp: use of closed connection: %w", transport.ErrClosed)

// aLongTimeAgo is a deadline in the past, which unblocks a pending read or
// write at once.
var aLongTimeAgo = time.Unix(1, 0)

// Listen binds a UDP socket over IPv4 to addr, "host:port" (such as
// "0.0.0.0:9999", "127.0.0.1:0" or ":0"), and returns it as a Conn. An
// empty host, like "0.0.0.0", means every interface, which a socket that
// receives broadcasts needs; port 0, a port the system picks (LocalAddr
// tells which). The socket has SO_BROADCAST set, so Send and Broadcast may
// send to broadcast addresses.
//
// Listen returns an error for a Config out of range, for an addr that is
// not an IPv4 "host:port", and when the system refuses the bind; it wraps
// transport.ErrAddrInUse when the port is taken (by a socket without
// Shared, or while cfg.Shared is false), along with the system's error.
// It does not block.
func Listen(addr string, cfg Config) (*Conn, error) {
	limit := cfg.MaxDatagramBytes
	if limit == 0 {
		limit = DefaultMaxDatagramBytes
	}
	if limit < 0 || limit > MaxDatagramBytesLimit {
		return nil, fmt.Errorf("udp: MaxDatagramBytes %d out of range [0, %d]", cfg.MaxDatagramBytes, MaxDatagramBytesLimit)
	}
	lc := net.ListenConfig{Control: control(cfg.Shared)}
	pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		if isAddrInUse(err) {
			return nil, fmt.Errorf("udp: listen %s: %w (%w)", addr, transport.ErrAddrInUse, err)
		}
		return nil, fmt.Errorf("udp: listen %s: %w", addr, err)
	}
	uc := pc.(*net.UDPConn)
	local := uc.LocalAddr().(*net.UDPAddr).AddrPort()
	return &Conn{
		uc:    uc,
		limit: limit,
		local: netip.AddrPortFrom(local.Addr().Unmap(), local.Port()),
		done:  make(chan struct{}),
		rturn: make(chan struct{}, 1),
		buf:   make([]byte, limit+1),
		wturn: make(chan struct{}, 1),
	}, nil
}

// control returns the net.ListenConfig.Control of a socket: it sets
// SO_BROADCAST and, when shared, the options of Config.Shared.
func control(shared bool) func(network, address string, rc syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var err error
		cerr := rc.Control(func(fd uintptr) {
			err = setBroadcast(fd)
			if err == nil && shared {
				err = setShared(fd)
			}
		})
		if cerr != nil {
			return cerr
		}
		return err
	}
}

// Send sends b as one datagram to addr, an IPv4 address (or an IPv4-mapped
// IPv6 one), broadcast addresses included. See transport.PacketConn.
//
// Send returns an error wrapping transport.ErrDatagramTooLarge when b is
// longer than MaxDatagramBytes, transport.ErrClosed when the Conn is
// closed, and ctx's error when ctx is done before the system takes the
// datagram; nothing is sent then. ctx's deadline, if any, becomes the
// socket's write deadline. Other errors (addr not IPv4, no route) wrap the
// system's error. Send takes its turn after the Sends and Broadcasts
// before it (see Conn); ctx and Close end that wait too.
func (c *Conn) Send(ctx context.Context, b []byte, addr netip.AddrPort) error {
	if err := c.checkSend(ctx, b); err != nil {
		return err
	}
	return c.write(ctx, b, addr)
}

// checkSend returns the error of a Send or Broadcast of b that cannot
// start.
func (c *Conn) checkSend(ctx context.Context, b []byte) error {
	if c.closed.Load() {
		return errClosed
	}
	if len(b) > c.limit {
		return fmt.Errorf("udp: datagram of %d bytes, over MaxDatagramBytes %d: %w",
			len(b), c.limit, transport.ErrDatagramTooLarge)
	}
	return ctx.Err()
}

// write writes b as one datagram to addr, within ctx.
func (c *Conn) write(ctx context.Context, b []byte, addr netip.AddrPort) error {
	ip := addr.Addr().Unmap()
	if !ip.Is4() {
		return fmt.Errorf("udp: send to %v: not an IPv4 address", addr)
	}
	addr = netip.AddrPortFrom(ip, addr.Port())

	if err := c.takeTurn(ctx, c.wturn); err != nil {
		return err
	}
	defer func() { <-c.wturn }()
	deadline, _ := ctx.Deadline()
	c.uc.SetWriteDeadline(deadline)
	stop := interrupt(ctx, c.uc.SetWriteDeadline)
	_, err := c.uc.WriteToUDPAddrPort(b, addr)
	stop()
	if err != nil {
		return c.ioErr(ctx, "send to "+addr.String(), err)
	}
	return nil
}

// Broadcast sends b as one datagram to port at every address of
// BroadcastAddrs, each once, and returns those it sent to. A failure to
// send to one address does not stop the others; Broadcast returns an error
// only when it sent to none (wrapping the first failure), when b is
// oversize (transport.ErrDatagramTooLarge), or when the Conn is closed
// (transport.ErrClosed) or ctx done before it is through; in the last two
// cases, it also returns the addresses already sent to. A broadcast sent
// out of an interface also reaches the sockets of this host that listen
// on 0.0.0.0 and port, once per address. See transport.PacketConn.
func (c *Conn) Broadcast(ctx context.Context, b []byte, port uint16) ([]netip.AddrPort, error) {
	if err := c.checkSend(ctx, b); err != nil {
		return nil, err
	}
	bas, err := BroadcastAddrs()
	if err != nil {
		return nil, err
	}
	var sent []netip.AddrPort
	var first error
	seen := make(map[netip.Addr]bool, len(bas))
	for _, ba := range bas {
		if seen[ba.Addr] {
			continue
		}
		seen[ba.Addr] = true
		to := netip.AddrPortFrom(ba.Addr, port)
		err := c.write(ctx, b, to)
		switch {
		case err == nil:
			sent = append(sent, to)
		case errors.Is(err, transport.ErrClosed) || ctx.Err() != nil:
			return sent, err
		case first == nil:
			first = fmt.Errorf("udp: broadcast via %s: %w", ba.Interface, err)
		}
	}
	if len(sent) == 0 {
		if first == nil {
			first = errors.New("udp: broadcast: the host has no broadcast address")
		}
		return nil, first
	}
	return sent, nil
}

// Recv waits for the next datagram and returns a copy of it and its
// sender, an IPv4 address. See transport.PacketConn.
//
// Recv blocks until a datagram arrives, ctx is done (ctx's error; no
// datagram is consumed and the Conn stays usable) or the Conn is closed
// (an error wrapping transport.ErrClosed). A datagram longer than
// MaxDatagramBytes is dropped: Recv returns its sender and an error
// wrapping transport.ErrDatagramTooLarge that names it. Recv takes its
// turn after the Recvs before it (see Conn); ctx and Close end that wait
// too.
func (c *Conn) Recv(ctx context.Context) ([]byte, netip.AddrPort, error) {
	if err := c.takeTurn(ctx, c.rturn); err != nil {
		return nil, netip.AddrPort{}, err
	}
	defer func() { <-c.rturn }()
	deadline, _ := ctx.Deadline()
	c.uc.SetReadDeadline(deadline)
	stop := interrupt(ctx, c.uc.SetReadDeadline)
	n, from, err := c.uc.ReadFromUDPAddrPort(c.buf)
	stop()
	from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	if err != nil && isMsgSize(err) {
		n = len(c.buf) // Windows does not truncate silently, nor say who sent it
	} else if err != nil {
		return nil, netip.AddrPort{}, c.ioErr(ctx, "receive", err)
	}
	if n > c.limit {
		sender := from.String()
		if !from.IsValid() {
			sender = "an unknown sender"
		}
		return nil, from, fmt.Errorf("udp: datagram from %s dropped: over MaxDatagramBytes %d: %w",
			sender, c.limit, transport.ErrDatagramTooLarge)
	}
	b := make([]byte, n)
	copy(b, c.buf)
	return b, from, nil
}

// takeTurn waits for the turn of turn, c.rturn or c.wturn, and returns
// nil once it has it, or an error without it: ctx's if ctx is done first,
// one wrapping transport.ErrClosed if the Conn is closed first.
func (c *Conn) takeTurn(ctx context.Context, turn chan struct{}) error {
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return errClosed
	}
	// select chose at random among the ready cases.
	err := ctx.Err()
	if c.closed.Load() {
		err = errClosed
	}
	if err != nil {
		<-turn
	}
	return err
}

// interrupt arranges for setDeadline(aLongTimeAgo) to be called when ctx
// is done, unblocking the pending read or write. The returned stop
// cancels that, and, if it already started, waits for it to finish, so
// that it cannot touch the deadline of a later call; call stop before
// ending the turn that owns the deadline.
func interrupt(ctx context.Context, setDeadline func(time.Time) error) (stop func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	fired := make(chan struct{})
	stopf := context.AfterFunc(ctx, func() {
		setDeadline(aLongTimeAgo)
		close(fired)
	})
	return func() {
		if !stopf() {
			<-fired
		}
	}
}

// ioErr returns the error of a read or write of the socket that failed
// with err, while ctx: transport.ErrClosed first, then ctx's, then err.
func (c *Conn) ioErr(ctx context.Context, op string, err error) error {
	if c.closed.Load() || errors.Is(err, net.ErrClosed) {
		return errClosed
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		// The socket's deadline, ctx's, passed just before ctx's timer.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return context.DeadlineExceeded
		}
	}
	return fmt.Errorf("udp: %s: %w", op, err)
}

// MaxDatagramBytes returns the largest datagram, in bytes, that the Conn
// sends and receives: Config.MaxDatagramBytes, or DefaultMaxDatagramBytes.
func (c *Conn) MaxDatagramBytes() int { return c.limit }

// LocalAddr returns the address the Conn is bound to, with the port the
// system picked if Listen was given port 0; its address is 0.0.0.0 when
// the Conn listens on every interface.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// Close closes the socket and frees its port (once no other socket shares
// it). Pending and later calls return errors wrapping
// transport.ErrClosed. Close is idempotent: calls after the first do
// nothing and return nil.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
		if cerr := c.uc.Close(); cerr != nil {
			err = fmt.Errorf("udp: close: %w", cerr)
		}
	})
	return err
}

// BroadcastAddr is a broadcast address of the host: the directed
// broadcast address of one IPv4 address of one interface.
type BroadcastAddr struct {
	// Interface is the name of the interface, such as "eth0" or "lo".
	Interface string
	// Local is the interface's address, with the length of its network
	// prefix, such as 192.168.1.20/24.
	Local netip.Prefix
	// Addr is the directed broadcast address of Local: its network
	// prefix followed by ones, such as 192.168.1.255.
	Addr netip.Addr
}

// BroadcastAddrs returns the broadcast addresses of the host, one per IPv4
// address of each interface that is up and either broadcast-capable or
// the loopback interface, in the order of the system's interface list. An
// up loopback interface with 127.0.0.1/8 gives 127.255.255.255, which
// reaches the sockets of this host only. Addresses with a prefix of /31 or
// /32 have no broadcast address and are left out, as are IPv6 addresses
// and interfaces that are down or point-to-point. It returns an error,
// wrapping the system's, only if the interfaces cannot be listed.
//
// The list is read afresh at each call, so it follows interfaces that come
// up or go down; it costs a few system calls.
func BroadcastAddrs() ([]BroadcastAddr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("udp: list interfaces: %w", err)
	}
	var out []BroadcastAddr
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&(net.FlagBroadcast|net.FlagLoopback) == 0 {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			continue // the interface went away meanwhile
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			ones, bits := ipn.Mask.Size()
			ip = ip.Unmap()
			if !ok || !ip.Is4() || ip.IsUnspecified() || bits != 32 || ones == 0 || ones > 30 {
				continue
			}
			out = append(out, BroadcastAddr{
				Interface: ifi.Name,
				Local:     netip.PrefixFrom(ip, ones),
				Addr:      directedBroadcast(ip, ones),
			})
		}
	}
	return out, nil
}

// directedBroadcast returns the address of ip's network of prefix length
// ones with every host bit set.
func directedBroadcast(ip netip.Addr, ones int) netip.Addr {
	a := ip.As4()
	binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(a[:])|(1<<(32-ones)-1))
	return netip.AddrFrom4(a)
}

// SourceFor returns the local address the system would send from to reach
// remote, an IPv4 address: the address of the interface its route goes
// through. On a host with several addresses, it is the one a responder
// should announce to a prober at remote, since remote can reach it. It
// connects a UDP socket to remote, which sends nothing, and closes it. It
// returns an error when remote is not IPv4 or has no route.
func SourceFor(remote netip.Addr) (netip.Addr, error) {
	remote = remote.Unmap()
	if !remote.Is4() {
		return netip.Addr{}, fmt.Errorf("udp: source for %v: not an IPv4 address", remote)
	}
	// SO_BROADCAST lets remote be a broadcast address too; the port is
	// any but 0, which a connect refuses on some systems.
	d := net.Dialer{Control: control(false)}
	conn, err := d.Dial("udp4", netip.AddrPortFrom(remote, 9).String())
	if err != nil {
		return netip.Addr{}, fmt.Errorf("udp: source for %v: %w", remote, err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}
