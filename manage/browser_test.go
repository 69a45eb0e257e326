package manage_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/transport/tcp"
)

// browser returns a headless Chromium's context, closed at cleanup, or
// skips the test when none is installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("no Chromium to test the page in: install Debian's package chromium (apt-get install chromium; .ci/run does)")
	}
	// The flags keep Chromium from reaching for Google's hosts, which a
	// closed network refuses (see .ci/run).
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(ctx), "start %s", path)
	return ctx
}

// TestPageInBrowser opens switch a's page of a line a-b-c-d in headless
// Chromium: it draws the 4 switches and 3 links, following each
// neighbour's management address; a filter c subscribes to with TTL 1
// appears under the links c-b and c-d, propagated by c, and not under
// a-b; d's slow consumer is marked; d's gateway to place office is drawn
// to a node of that place. A screenshot goes to $SION_ARTIFACTS
// (and, with SION_UPDATE_SCREENSHOT=1, to testdata/management-page.png).
func TestPageInBrowser(t *testing.T) {
	ctx := browser(t)
	pl := newPlace(t, []string{"a", "b", "c", "d"}, []int{-1, 0, 1, 2})
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	const drawn = `document.querySelectorAll("[data-switch]").length === 4 && document.querySelectorAll("[data-link]").length === 3`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(pl.views[0].URL+"/"),
		chromedp.Poll[chromedp.Void](drawn, chromedp.WithPollingTimeout(30*time.Second))))
	switches, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("[data-switch]")].map(e => e.dataset.switch).sort()`))
	require.NoError(t, err)
	links, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("[data-link]")].map(e => e.dataset.link).sort()`))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c", "d"}, switches)
	assert.Equal(t, []string{"b->a", "c->b", "d->c"}, links, "arrows from child to parent")

	const f = "{type ⊑ Alarm; level >= 7}"
	s, err := pl.sws[2].Open(context.Background(), sion.SessionConfig{Name: "operator"})
	require.NoError(t, err)
	_, err = s.Subscribe(context.Background(), f, sion.WithTTL(1))
	require.NoError(t, err)

	// d's slow consumer: a queue of one, two readings published on a.
	sd, err := pl.sws[3].Open(context.Background(), sion.SessionConfig{Name: "laggard"})
	require.NoError(t, err)
	slow, err := sd.Subscribe(context.Background(), "{type ⊑ Reading}", sion.WithQueue(1))
	require.NoError(t, err)
	require.NoError(t, pl.sws[3].Flush(context.Background()))
	pub, err := pl.sws[0].Open(context.Background(), sion.SessionConfig{Name: "sensor"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		require.NoError(t, pub.Publish(context.Background(), &sion.Event{Type: "Reading"}))
		return slow.Stats().Slow
	}, 20*time.Second, 50*time.Millisecond)

	// A gateway from d to another place, drawn as an edge to a node of
	// that place.
	_, addrY, _ := federated(t, "office", "y")
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	fctx, fcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer fcancel()
	g, err := pl.sws[3].Federate(fctx, tr, addrY, sion.GatewayConfig{Name: "plant-office", Export: &sion.DirectionConfig{},
		RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, g.Close()) })

	const shown = `[...document.querySelectorAll(".route")].filter(e => e.dataset.filter === %q)` +
		`.map(e => e.closest("[data-link]").dataset.link + " " + e.dataset.from + "→" + e.dataset.to + " ×" + e.dataset.refs).sort()`
	js := fmt.Sprintf(shown, f)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Poll[chromedp.Void](js+`.length === 2`, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-switch="d"][data-slow]') !== null`, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-gateway="plant-office"]') !== null && document.querySelector('[data-place="office/y"]') !== null`,
			chromedp.WithPollingTimeout(30*time.Second))))
	routes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js))
	require.NoError(t, err)
	assert.Equal(t, []string{"c->b c→b ×1", "d->c c→d ×1"}, routes, "on c's two links, from c; not on a-b")

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := os.Getenv("SION_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	out := filepath.Join(dir, "management-page.png")
	require.NoError(t, os.WriteFile(out, png, 0o644))
	t.Logf("screenshot of the management page: %s", out)
	if os.Getenv("SION_UPDATE_SCREENSHOT") == "1" {
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "management-page.png"), png, 0o644))
	}
}

// TestPageOddNames opens the page of a place whose switch, peer,
// session, gateway and place names and a filter hold markup, quotes,
// characters that end a CSS selector or an attribute value, names of
// JavaScript's Object properties, and the longest name a switch may
// have. The page draws them as text: no element comes from them, no
// dialog opens, no Content-Security-Policy violation happens, and the
// page does not stop on an error.
func TestPageOddNames(t *testing.T) {
	ctx := browser(t)
	long := strings.Repeat("ü", sion.MaxNameBytes/2)
	names := []string{`a"b<c`, `x"] [data-y='</script><img src=x onerror=alert(1)>&amp;`, "constructor", long, "__proto__"}
	// constructor's and __proto__'s views are not listed in anyone's
	// Peers: the page must not find them among Object's properties.
	pl := newPlaceUnlisted(t, names, []int{-1, 0, 1, 0, 0}, "constructor", "__proto__")
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	var dialogs atomic.Int32
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{}) // dismiss, so the page goes on
		}
	}))
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `window.__csp = [];
		document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`})
	require.NoError(t, err)

	const f = `{type ⊑ Note; text = "\"<img src=x onerror=alert(2)></script>'&amp;\n"}`
	canonical := filter.MustCompile(f).String()
	s, err := pl.sws[1].Open(context.Background(), sion.SessionConfig{Name: `<b id="s">sess</b>`})
	require.NoError(t, err)
	_, err = s.Subscribe(context.Background(), f, sion.WithTTL(1))
	require.NoError(t, err)
	_, err = s.Subscribe(context.Background(), "{type ⊑ Note; text = \"<img src=x onerror=alert(3)>\"}", sion.WithTTL(1))
	require.NoError(t, err)

	_, addrY, _ := federated(t, `o"ff</script><i>ce`, `y'<u>`)
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	fctx, fcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer fcancel()
	g, err := pl.sws[0].Federate(fctx, tr, addrY, sion.GatewayConfig{Name: `gw"]<s>`, Export: &sion.DirectionConfig{},
		RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, g.Close()) })

	js := fmt.Sprintf(`[...document.querySelectorAll(".route")].filter(e => e.dataset.filter === %q).length === 2`, canonical) +
		` && document.querySelectorAll("[data-switch]").length === 5 && [...document.querySelectorAll("[data-gateway]")].some(e => e.dataset.gateway === %q)`
	err = chromedp.Do(ctx,
		chromedp.Navigate(pl.views[0].URL+"/"),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(js, `gw"]<s>`), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("status").textContent + " | " + document.getElementById("graph").textContent`))
		require.NoError(t, err, "the page says: %s", status)
	}

	switches, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("[data-switch]")].map(e => e.dataset.switch).sort()`))
	require.NoError(t, err)
	assert.ElementsMatch(t, names, switches)
	labels, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("graph").textContent`))
	require.NoError(t, err)
	for _, want := range []string{`a"b<c`, `x"] [data-y='</script><img src=x onerror=alert(1)>&amp;`, "constructor", "__proto__", `gw"]<s>`, `o"ff</script><i>ce`, canonical} {
		assert.Contains(t, labels, want, "drawn as text")
	}
	table, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("detail").textContent`))
	require.NoError(t, err)
	assert.Contains(t, table, `a"b<c`)
	for _, check := range []struct{ name, js string }{
		{"no element from a name", `document.querySelectorAll("img, script:not([src]), b, i, u, s").length`},
		{"only the page's own script", `document.scripts.length - 1`},
		{"CSP violations", `window.__csp.length`},
		{"error status", `document.getElementById("status").className === "error" ? 1 : 0`},
	} {
		t.Run(check.name, func(t *testing.T) {
			n, err := chromedp.Run(ctx, chromedp.Evaluate[int](check.js))
			require.NoError(t, err)
			assert.Zero(t, n)
		})
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("status").textContent`))
	require.NoError(t, err)
	assert.NotContains(t, status, "cannot read")
	assert.Zero(t, dialogs.Load(), "dialogs opened")
}
