package events

import (
	"fmt"
	"net/netip"
	"net/url"
	"syscall"

	"code.dny.dev/ssrf"
)

// The refused ranges are the IANA special-purpose registries for IPv4 and IPv6 as
// code.dny.dev/ssrf generates them (loopback, private, link-local, CGNAT, unspecified,
// documentation, benchmarking, reserved, multicast, 6to4, Teredo and the other IETF protocol
// assignments), and every IPv6 address outside the global unicast range 2000::/3 (unique
// local, link-local, multicast, NAT64, IPv4-compatible and IPv4-translated forms). Not a
// hand-kept list: updating the module updates them.
var (
	refusedV4     = ssrf.IPv4DeniedPrefixes
	refusedV6     = ssrf.IPv6DeniedPrefixes
	globalUnicast = ssrf.IPv6GlobalUnicast
)

// The IPv6 forms that carry an IPv4 address inside them (IPv4-mapped ::ffff:0:0/96 is
// unmapped first and decided as the IPv4 address it is).
var (
	nat64       = ssrf.IPv6NAT64Prefix                     // 64:ff9b::/96 (RFC 6052): the last 32 bits
	sixToFour   = netip.MustParsePrefix("2002::/16")       // 6to4 (RFC 3056): bits 16–47
	teredo      = netip.MustParsePrefix("2001::/32")       // Teredo (RFC 4380): server bits 32–63, client the last 32 inverted
	v4Compat    = netip.MustParsePrefix("::/96")           // IPv4-compatible (RFC 4291, deprecated): the last 32 bits
	notV4Compat = netip.MustParsePrefix("::/127")          // but :: and ::1 are themselves, not 0.0.0.0 and 0.0.0.1
	v4Translate = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (RFC 2765): the last 32 bits
)

// AddressPolicy decides which resolved addresses a delivery may connect to.
type AddressPolicy struct {
	// Allow lists ranges permitted although refused by default (--notification-allow-cidrs).
	// An allowed range wins over a refused one.
	Allow []netip.Prefix
}

// Check answers nil when addr may be connected to, an error saying why not otherwise
// (always containing "refused", and wrapping ErrAddressRefused).
//
// The decision is on the address as it would be dialled: an IPv6 zone id (fe80::1%eth0) is
// set aside and the address decided as it is without one, and an address with a zone is
// refused even then unless allowed (a zone names a local interface: no public destination
// has one). An IPv4-mapped address is decided as its IPv4 address. An IPv6 form that carries
// an IPv4 address (NAT64, 6to4, Teredo, IPv4-compatible, IPv4-translated) must pass on both:
// the IPv6 range and the IPv4 address inside it, so that allowing a NAT64 prefix does not
// open 64:ff9b::a9fe:a9fe (169.254.169.254, the metadata service) with it.
func (p AddressPolicy) Check(addr netip.Addr) error {
	if !addr.IsValid() {
		return fmt.Errorf("invalid address; %w", ErrAddressRefused)
	}
	zone := addr.Zone()
	a := addr.WithZone("").Unmap()
	if err := p.check(a); err != nil {
		return err
	}
	for _, v4 := range EmbeddedIPv4(a) {
		if err := p.check(v4); err != nil {
			return fmt.Errorf("address %s carries the IPv4 address %s: %w", a, v4, err)
		}
	}
	if zone != "" && !p.allowed(a) {
		return fmt.Errorf("address %s has a zone id (%s): it names a local interface, not a public destination; %w",
			a, zone, ErrAddressRefused)
	}
	return nil
}

// check decides one address (no zone, unmapped) on the allow-list and the refused ranges.
func (p AddressPolicy) check(a netip.Addr) error {
	if p.allowed(a) {
		return nil
	}
	if r, refused := refusedRange(a); refused {
		return fmt.Errorf("address %s is not public (%s); %w", a, r, ErrAddressRefused)
	}
	return nil
}

func (p AddressPolicy) allowed(a netip.Addr) bool {
	for _, r := range p.Allow {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// refusedRange answers the special-purpose range a (no zone, unmapped) falls in.
func refusedRange(a netip.Addr) (string, bool) {
	if a.Is4() {
		for _, r := range refusedV4 {
			if r.Contains(a) {
				return r.String(), true
			}
		}
		return "", false
	}
	if !globalUnicast.Contains(a) {
		return "outside the global unicast range " + globalUnicast.String(), true
	}
	for _, r := range refusedV6 {
		if r.Contains(a) {
			return r.String(), true
		}
	}
	return "", false
}

// EmbeddedIPv4 answers the IPv4 addresses an IPv6 address carries (none for most): NAT64
// 64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32 (its server and its client),
// IPv4-compatible ::/96 (but :: and ::1) and IPv4-translated ::ffff:0:0:0/96. An IPv4-mapped address is an
// IPv4 address (netip.Addr.Unmap) and answers itself.
func EmbeddedIPv4(a netip.Addr) []netip.Addr {
	a = a.WithZone("")
	if a.Is4In6() {
		return []netip.Addr{a.Unmap()}
	}
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(x []byte) netip.Addr { return netip.AddrFrom4([4]byte(x)) }
	switch {
	case notV4Compat.Contains(a):
		return nil
	case nat64.Contains(a), v4Compat.Contains(a), v4Translate.Contains(a):
		return []netip.Addr{v4(b[12:16])}
	case sixToFour.Contains(a):
		return []netip.Addr{v4(b[2:6])}
	case teredo.Contains(a):
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return []netip.Addr{v4(b[4:8]), netip.AddrFrom4(client)}
	}
	return nil
}

// Control is a net.Dialer Control function that enforces the policy on the address actually
// being connected to, after DNS resolution (so a name that resolves, or re-resolves, to an
// internal address is refused too).
func (p AddressPolicy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAddressRefused, err)
	}
	return p.Check(ap.Addr())
}

// CheckURLHost answers why a subscription URL is refused for its host, or nil: a host that
// is an address literal ("https://[fe80::1%25eth0]/", "https://192.0.2.1/") is decided now,
// as the dialer would decide it; a name is resolved at every delivery and its addresses
// decided then (Control). The URL's other rules (https, no credentials, ...) are not checked
// here. Call it where a subscription is created or changed, with the deliverer's policy, so
// that an address that can never be delivered to is refused with a 422 rather than accepted.
func (p AddressPolicy) CheckURLHost(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("URL is not valid; %w", ErrAddressRefused)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("URL has no host; %w", ErrAddressRefused)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil // a name: decided on its addresses at every delivery
	}
	return p.Check(addr)
}

// ParseCIDRs parses an allow-list flag's comma-separated CIDRs.
func ParseCIDRs(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("notification allow-list: %w", err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
