package main

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHTTPConnLimit: the management view serves at most 64
// connections (MaxHTTPConns) at once. The test holds 64 kept-alive
// connections, each of which was served a request (so the view accepted
// all of them); a 65th connection's request gets no answer while they
// are held, and is answered once one of them closes.
func TestHTTPConnLimit(t *testing.T) {
	const limit = 64 // MaxHTTPConns
	bin := sionBinary(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
	sw := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-http", "127.0.0.1:0")
	line(t, sw.stdout)
	view := strings.TrimPrefix(lastWord(line(t, sw.stdout)), "http://")

	get := func(c net.Conn) (*http.Response, error) {
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: sion\r\n\r\n")); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	held := make([]net.Conn, 0, limit)
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range limit {
		c, err := net.Dial("tcp", view)
		require.NoError(t, err)
		held = append(held, c)
		require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
		resp, err := get(c)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}

	extra, err := net.Dial("tcp", view) // the kernel accepts it; the view does not yet
	require.NoError(t, err)
	t.Cleanup(func() { extra.Close() })
	require.NoError(t, extra.SetDeadline(time.Now().Add(500*time.Millisecond)))
	_, err = get(extra)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "a request beyond the limit was answered: %v", err)

	held[0].Close()
	extra.Close()
	again, err := net.Dial("tcp", view)
	require.NoError(t, err)
	t.Cleanup(func() { again.Close() })
	require.NoError(t, again.SetDeadline(time.Now().Add(30*time.Second)))
	resp, err := get(again)
	require.NoError(t, err, "a connection ended: the view serves the next")
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	require.NoError(t, sw.cmd.Process.Signal(syscall.SIGTERM))
	status, _, stderr := exitCode(t, sw)
	assert.Equal(t, 0, status, stderr)
}

// TestHTTPServerLimits: the management view's server has every timeout
// and a header limit smaller than net/http's default.
func TestHTTPServerLimits(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler())
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout} {
		t.Run(name, func(t *testing.T) { assert.Positive(t, d) })
	}
	t.Run("MaxHeaderBytes", func(t *testing.T) {
		assert.Positive(t, srv.MaxHeaderBytes)
		assert.Less(t, srv.MaxHeaderBytes, http.DefaultMaxHeaderBytes)
	})
}

// TestServeRefusesAtStartup: settings that cannot work are refused before
// serve starts anything — status 2 when the command line is wrong, 1 when
// the config file is — with a message naming the flag or field and the
// value.
func TestServeRefusesAtStartup(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	sameInFile := write("same.json", `{"listen": "127.0.0.1:47913", "http": "localhost:47913"}`)
	peerInFile := write("peer.json", `{"http_peers": {"b": "javascript:alert(1)"}}`)
	nameInFile := write("name.json", `{"name": "a\u001b[2Jb"}`)
	cases := []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"-http on -listen's address", []string{"-listen", "127.0.0.1:47913", "-http", "127.0.0.1:47913"}, 2,
			"sion serve: -http 127.0.0.1:47913 is the switch's own address (-listen 127.0.0.1:47913)"},
		{"-http on every interface and -listen's port", []string{"-listen", "127.0.0.1:47913", "-http", ":47913"}, 2,
			"sion serve: -http :47913 is the switch's own address"},
		{"a link to itself", []string{"-listen", "127.0.0.1:47913", "-link", "127.0.0.1:47914", "-link", "localhost:47913"}, 2,
			"sion serve: -link localhost:47913: a link to this switch's own address (-listen 127.0.0.1:47913)"},
		{"an empty name", []string{"-name", ""}, 2, `sion serve: -name "": the switch's name is empty`},
		{"a name with an escape sequence", []string{"-name", "a\x1b[2Jb"}, 2, `sion serve: -name "a\x1b[2Jb": the switch's name holds a character that does not print`},
		{"a place with a newline", []string{"-place", "usgs\nforged line"}, 2, `sion serve: -place "usgs\nforged line": the event place's name holds`},
		{"an -http-peer URL that is not http", []string{"-http-peer", "b=ftp://10.0.0.2:8747"}, 2,
			`sion serve: -http-peer b=ftp://10.0.0.2:8747: the URL ftp://10.0.0.2:8747 is not http://HOST[:PORT][/PATH] or https://…`},
		{"an -http-peer URL without a host", []string{"-http-peer", "b=http:///api"}, 2, "the URL http:///api is not http://HOST"},
		{"an -http-peer without a URL", []string{"-http-peer", "b"}, 2, "sion serve: -http-peer b: want NAME=URL"},
		{"the same address in a config file", []string{"-config", sameInFile}, 1,
			"sion serve: config " + sameInFile + ": http localhost:47913 is the switch's own address (config " + sameInFile + ": listen 127.0.0.1:47913)"},
		{"an -http-peer URL in a config file", []string{"-config", peerInFile}, 1,
			"sion serve: config " + peerInFile + ": http_peers: -http-peer b=javascript:alert(1): the URL javascript:alert(1) is not http://"},
		{"a name in a config file", []string{"-config", nameInFile}, 1, "sion serve: config " + nameInFile + `: name "a\x1b[2Jb": the switch's name holds`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "-ontology", "example-alerts.json"}, tc.args...)
			status := run(args, &stdout, &stderr)
			assert.Equal(t, tc.status, status, stderr.String())
			assert.Contains(t, stderr.String(), tc.stderr)
			assert.Empty(t, stdout.String(), "nothing was served")
		})
	}
}
