package main

import "testing"

func TestCheckPprofAddr(t *testing.T) {
	for _, tc := range []struct {
		addr        string
		allowRemote bool
		ok          bool
	}{
		{"", false, true},  // disabled
		{"0", false, true}, // disabled, as controller-runtime reads it
		{"127.0.0.1:6060", false, true},
		{"127.0.0.2:6060", false, true}, // all of 127.0.0.0/8 is loopback
		{"[::1]:6060", false, true},
		{"localhost:6060", false, true},
		{":6060", false, false}, // every interface
		{"0.0.0.0:6060", false, false},
		{"[::]:6060", false, false},
		{"10.0.0.5:6060", false, false},
		{"pod.example.com:6060", false, false},
		{"[fe80::1%eth0]:6060", false, false},
		{"127.0.0.1", false, false}, // no port: not an address
		{":6060", true, true},       // the operator says it is guarded
		{"0.0.0.0:6060", true, true},
	} {
		err := checkPprofAddr(tc.addr, tc.allowRemote)
		if (err == nil) != tc.ok {
			t.Errorf("checkPprofAddr(%q, allowRemote=%v) = %v, want ok=%v", tc.addr, tc.allowRemote, err, tc.ok)
		}
	}
}
