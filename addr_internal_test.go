package sion

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAddressRules: a peer is never given, and never dials, an
// unspecified address, nor a loopback address of another host (CASES.md
// B15); a concrete listen or advertise host is given as it is.
func TestAddressRules(t *testing.T) {
	lo, remote := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.20.0.2")
	for addr, want := range map[string]bool{
		"127.0.0.1:80": true, "10.20.0.1:80": true, "0.0.0.0:80": false, "[::]:80": false,
		"10.20.0.1:0": false, "224.0.0.1:80": false, "name": false,
	} {
		assert.Equal(t, want, usableAddr(addr, lo), "%s from loopback", addr)
	}
	assert.False(t, usableAddr("127.0.0.1:80", remote), "loopback from another host")
	assert.True(t, usableAddr("10.20.0.1:80", remote))

	e := &Entity{}
	assert.Equal(t, "127.0.0.1:7", e.reachableAddr("0.0.0.0:7", lo), "the interface facing a local prober is loopback")
	assert.Equal(t, "", e.reachableAddr("127.0.0.1:7", remote), "never loopback to another host")
	assert.Equal(t, "10.9.9.9:7", e.reachableAddr("10.9.9.9:7", remote), "a concrete listen host as it is")
	assert.Equal(t, "mem-1", e.reachableAddr("mem-1", lo), "non-IP addresses (mem) as they are")
	e.cfg.AdvertiseHost = "10.20.0.1"
	assert.Equal(t, "10.20.0.1:7", e.reachableAddr("0.0.0.0:7", remote), "AdvertiseHost wins")

	local := &net.TCPAddr{IP: net.IPv4(10, 20, 0, 1), Port: 5555}
	assert.Equal(t, "10.20.0.1:7", concreteAddr("0.0.0.0:7", local))
	assert.Equal(t, "10.20.0.1:7", concreteAddr(":7", local))
	assert.Equal(t, "10.20.0.1:7", concreteAddr("[::]:7", local))
	assert.Equal(t, "127.0.0.1:7", concreteAddr("127.0.0.1:7", local))
	assert.Equal(t, "sw-a", concreteAddr("sw-a", local))
}
