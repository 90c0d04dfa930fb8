// Command dashboard-render draws docs/grafana/flexsite-dashboard.json's panels from real
// metrics, as Grafana would plot them, where Grafana itself cannot be installed:
//
//	go run . load   --api http://127.0.0.1:8080 --metrics http://127.0.0.1:8082/metrics --out scrapes.txt --for 3m
//	go run . render --scrapes scrapes.txt --dashboard ../../docs/grafana/flexsite-dashboard.json --out ../../docs/grafana/dashboard.png
//
// load drives a running `make run` (onboards, reads, unenrols, refused enrols, bad logins)
// while scraping its metrics endpoint every second; render evaluates each panel's PromQL over
// those scrapes. It is not PromQL: it knows the three shapes the dashboard uses
// (sum [by] (rate(m[w])), histogram_quantile(q, sum by (le, ...) (rate(m_bucket[w]))),
// sum [by] (gauge)), treats every label matcher as matching (one job), and stops on anything
// else. It lives in its own module so that the manager does not depend on gonum.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dashboard-render load|render [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var err error
	switch os.Args[1] {
	case "load":
		api := fs.String("api", "http://127.0.0.1:8080", "REST API of `make run`")
		metrics := fs.String("metrics", "http://127.0.0.1:8082/metrics", "its metrics endpoint")
		password := fs.String("password", envOr("FLEXSITE_DEMO_PASSWORD", "flexsite-demo"), "the demo client's password")
		out := fs.String("out", "scrapes.txt", "where to write the scrapes")
		d := fs.Duration("for", 3*time.Minute, "how long to drive the API")
		_ = fs.Parse(os.Args[2:])
		err = runLoad(*api, *metrics, *password, *out, *d)
	case "render":
		scrapes := fs.String("scrapes", "scrapes.txt", "scrapes written by load")
		dashboard := fs.String("dashboard", "../../docs/grafana/flexsite-dashboard.json", "the Grafana dashboard")
		out := fs.String("out", "../../docs/grafana/dashboard.png", "the PNG to write")
		window := fs.Duration("window", 15*time.Second, "the rate() window ($__rate_interval)")
		title := fs.String("title", "", "a caption line under the dashboard's title")
		_ = fs.Parse(os.Args[2:])
		err = render(*scrapes, *dashboard, *out, *window, *title)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
