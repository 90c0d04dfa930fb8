package validation

// ProviderName reports whether name can name a device provider: a DeviceProvider's object
// name, a DNS label of lower-case letters, digits and inner hyphens (docs/api.md, "Device
// connections"). Anything else names no provider, and is never sent to the API server.
func ProviderName(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for i, c := range name {
		lower, digit, inner := c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-' && i > 0 && i < len(name)-1
		if !lower && !digit && !inner {
			return false
		}
	}
	return true
}
