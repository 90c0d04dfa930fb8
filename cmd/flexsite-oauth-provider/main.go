// Command flexsite-oauth-provider runs a maker's cloud on your own machine for `make run`: a
// real OAuth 2.0 authorisation server (internal/testing/oauthprovider: ory/fosite, code +
// PKCE S256, refresh-token rotation, RFC 7009 revocation, a consent page) on a loopback
// address, whose client is Flexsite. config/samples/devices/myenergi-on-loopback.yaml declares
// it as the DeviceProvider "myenergi". Its tokens live in memory: a restart forgets them.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flexsite/flexsite/internal/testing/oauthprovider"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9096", "Loopback address to listen on.")
	clientID := flag.String("client-id", "flexsite", "Flexsite's client id.")
	secret := flag.String("client-secret", "flexsite-dev-provider", "Flexsite's client secret (the sample's Secret holds the same).")
	callback := flag.String("redirect-uri", "http://127.0.0.1:8080/oauth/callback",
		"Flexsite's callback (a loopback http URI matches on any port).")
	life := flag.Duration("access-token-lifetime", 2*time.Minute, "Lifetime of the access tokens it issues (short: watch them refreshed).")
	name := flag.String("display-name", "myenergi (on your machine)", "Name shown on the consent page.")
	flag.Parse()
	p, err := oauthprovider.Start(*addr, oauthprovider.Options{ClientID: *clientID, ClientSecret: *secret,
		RedirectURIs: []string{*callback}, AccessTokenLifespan: *life, DisplayName: *name})
	if err != nil {
		fmt.Fprintln(os.Stderr, "flexsite-oauth-provider:", err)
		os.Exit(1)
	}
	fmt.Printf("OAuth 2.0 provider on %s\n  authorization: %s\n  token:         %s\n  revocation:    %s\n"+
		"Send SIGUSR1 to revoke every token it issued (the household withdraws access). Ctrl-C stops it.\n",
		p.URL, p.AuthorizationURL(), p.TokenURL(), p.RevocationURL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1)
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
