package notify

import (
	"fmt"
	"net/netip"
	"syscall"
)

// refusedRanges are the addresses a delivery may not reach unless allowed: loopback,
// link-local, private (RFC 1918, unique local), CGNAT (RFC 6598), unspecified, multicast,
// and the other special-purpose ranges a cluster's internal services live in.
var refusedRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// AddressPolicy decides which resolved addresses a delivery may connect to.
type AddressPolicy struct {
	// Allow lists ranges permitted although refused by default (--notification-allow-cidrs).
	Allow []netip.Prefix
}

// Check answers nil when addr may be connected to, an error saying why not otherwise.
func (p AddressPolicy) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	if !addr.IsValid() {
		return fmt.Errorf("invalid address")
	}
	for _, a := range p.Allow {
		if a.Contains(addr) {
			return nil
		}
	}
	for _, r := range refusedRanges {
		if r.Contains(addr) {
			return fmt.Errorf("address %s is not public (%s); refused", addr, r)
		}
	}
	return nil
}

// Control is a net.Dialer Control function that enforces the policy on the address actually
// being connected to, after DNS resolution (so a name that resolves, or re-resolves, to an
// internal address is refused too).
func (p AddressPolicy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused: %w", err)
	}
	return p.Check(ap.Addr())
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
