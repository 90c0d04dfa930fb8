// Command flexsite-oauth-provider runs a maker's cloud on your own machine for `make run`: a
// real OAuth 2.0 authorisation server (test/browser/oauthprovider: ory/fosite, code + PKCE
// S256, refresh-token rotation, RFC 7009 revocation, a consent page) on a loopback address,
// whose client is Flexsite. config/samples/devices/myenergi-on-loopback.yaml declares it as
// the DeviceProvider "myenergi". Its tokens live in memory: a restart forgets them.
//
// The main module's suites run it too (internal/testing/oauthprovider, with -control and
// -exit-on-stdin-eof): it lives in the test module so that fosite stays out of the manager's
// go.mod. Its first line of output names its URL.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/flexsite/flexsite/test/browser/oauthprovider"
)

// repeated is a flag that may be given more than once.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	addr := flag.String("addr", "127.0.0.1:9096", "Loopback address to listen on.")
	clientID := flag.String("client-id", "flexsite", "Flexsite's client id.")
	secret := flag.String("client-secret", "flexsite-dev-provider",
		"Flexsite's client secret (the sample's Secret holds the same; empty: a public client).")
	var callbacks repeated
	flag.Var(&callbacks, "redirect-uri",
		"Flexsite's callback, repeatable (a loopback http URI matches on any port; default http://127.0.0.1:8080/oauth/callback).")
	scopes := flag.String("scopes", "devices", "Comma-separated scopes the client may ask for.")
	life := flag.Duration("access-token-lifetime", 2*time.Minute, "Lifetime of the access tokens it issues (short: watch them refreshed).")
	name := flag.String("display-name", "myenergi (on your machine)", "Name shown on the consent page.")
	control := flag.Bool("control", false,
		"Serve "+oauthprovider.ControlPath+" (counters, revoke everything) for the process that started it.")
	exitOnEOF := flag.Bool("exit-on-stdin-eof", false, "Exit when standard input closes (the process that started it is gone).")
	flag.Parse()
	if len(callbacks) == 0 {
		callbacks = repeated{"http://127.0.0.1:8080/oauth/callback"}
	}
	start := oauthprovider.Start
	if *control {
		start = oauthprovider.StartControlled
	}
	p, err := start(*addr, oauthprovider.Options{ClientID: *clientID, ClientSecret: *secret,
		RedirectURIs: callbacks, Scopes: strings.Split(*scopes, ","), AccessTokenLifespan: *life, DisplayName: *name})
	if err != nil {
		fmt.Fprintln(os.Stderr, "flexsite-oauth-provider:", err)
		os.Exit(1)
	}
	fmt.Printf("OAuth 2.0 provider on %s\n  authorization: %s\n  token:         %s\n  revocation:    %s\n"+
		"Send SIGUSR1 to revoke every token it issued (the household withdraws access). Ctrl-C stops it.\n",
		p.URL, p.AuthorizationURL(), p.TokenURL(), p.RevocationURL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1)
	if *exitOnEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			sig <- syscall.SIGTERM
		}()
	}
	for s := range sig {
		if s == syscall.SIGUSR1 {
			p.RevokeEverything()
			fmt.Println("revoked every token: the next refresh is invalid_grant")
			continue
		}
		p.Close()
		return
	}
}
