package main

import "net"

// embeddedMetricsAddr is where --embedded serves the metrics unless told otherwise: plain HTTP
// on the loopback interface, so that a developer can curl it and point a local Prometheus at it.
const embeddedMetricsAddr = "127.0.0.1:8082"

// metricsURL is the address to scrape, for the log ("" when the endpoint is off).
func metricsURL(addr string, secure bool) string {
	if addr == "0" || addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	scheme := "http"
	if secure {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/metrics"
}
