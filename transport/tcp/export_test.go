package tcp

import "net"

// RawConn returns c's TCP socket, for tests that look at the kernel's
// queues.
func RawConn(c *Conn) net.Conn { return c.raw }

// ReceiveQueued returns the bytes of frames c holds for Recv, each
// counted with its length prefix.
func ReceiveQueued(c *Conn) int {
	c.rq.mu.Lock()
	defer c.rq.mu.Unlock()
	return c.rq.bytes
}
