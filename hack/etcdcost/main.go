// Command etcdcost measures what a household costs etcd and the API server, for the ceiling of
// one cluster (docs/scale.md, "What a household costs the cluster"; "Limits of one cluster"):
// envtest's kube-apiserver and etcd (hack/ensure-k8s-binaries.sh), a PostgreSQL
// (internal/db/dbtest), the manager's controllers and the REST API, all in this process. It
// onboards households through the REST API as the bench does (a Site, a charger of a
// qualified model, a battery, an Enrolment in limited_pause; the MPANClaim the onboard
// writes), stores a client-supplied device token for each (a DeviceConnection and its
// Secret), credits each a year of weekly rewards (PostgreSQL; the RewardLedger summary its
// controller writes), waits until every status has settled, then compacts and defragments
// etcd and reads its database size in use before and after. It prints, per household, every
// etcd key the households added, by resource (key and value bytes as etcd holds them), and
// etcd's database bytes in use, with and without the Events the onboards recorded (an Event
// lives an hour: kube-apiserver's --event-ttl). The memory figures are differences of whole
// processes (resident memory, the API server's Go heap): only thousands of households make
// them mean anything.
//
//	export KUBEBUILDER_ASSETS=$(hack/ensure-k8s-binaries.sh) FLEXSITE_POSTGRES_BIN=/usr/lib/postgresql/15/bin
//	go run ./hack/etcdcost -households 2000
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/probe"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/internal/validation"
)

const (
	keysNamespace = "flexsite-system"
	orgNamespace  = "org-etcdcost"
)

func main() {
	households := flag.Int("households", 2000, "households to onboard")
	concurrency := flag.Int("concurrency", 8, "concurrent REST clients")
	weeks := flag.Int("weeks", 52, "weekly rewards credited to each household")
	connection := flag.Bool("connection", true, "store a client-supplied device token for each household (a DeviceConnection and its Secret)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *households, *concurrency, *weeks, *connection); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, n, concurrency, weeks int, connection bool) error {
	ctrl.SetLogger(logr.Discard())
	env, err := testenv.Start(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	etcd := etcdAPI{base: env.ControlPlane.Etcd.URL.String()}
	testDB, err := dbtest.New(ctx)
	if err != nil {
		return err
	}
	defer testDB.Close(context.Background())
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNamespace}}); err != nil {
		return err
	}
	mgr, err := env.NewManager()
	if err != nil {
		return err
	}
	if err := controllers.SetupWithManager(ctx, mgr, controllers.Options{DB: testDB.Pool}); err != nil {
		return err
	}
	keys := auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNamespace, "flexsite-token-keys")
	if err := keys.Ensure(ctx); err != nil {
		return err
	}
	api := httptest.NewServer(server.NewServer(server.Config{
		Log: logr.Discard(), Cache: mgr.GetCache(), APIReader: mgr.GetAPIReader(), Client: mgr.GetClient(),
		Issuer: auth.NewIssuer(keys, time.Now), Authenticator: auth.NewAuthenticator(mgr.GetCache(), mgr.GetAPIReader()),
		Rewards: server.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30}, DB: testDB.Pool,
	}))
	defer api.Close()
	mgrCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		if err := mgr.Start(mgrCtx); err != nil {
			log.Printf("manager: %v", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the manager's cache did not sync")
	}
	if err := bootstrap.EnsureOrganisation(ctx, env.Client, bootstrap.Organisation{
		Namespace: orgNamespace, Username: "etcdcost", Password: "etcdcost-password",
		Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards},
	}); err != nil {
		return err
	}
	var token string
	if err := probe.Retry(ctx, time.Minute, time.Second, func() error { token, err = login(api.URL); return err }); err != nil {
		return err
	}

	// The baseline: the organisation, its API client, the catalogue, the manager's leases.
	if err := settle(ctx, etcd); err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		return err
	}
	apiserver := strings.TrimSuffix(env.Config.Host, "/")
	before, err := etcd.measure(ctx, hc, apiserver)
	if err != nil {
		return err
	}
	log.Printf("baseline: %d keys, db in use %d bytes", before.keys(), before.inUse)

	start := time.Now()
	var next atomic.Int64
	ids := make([]string, n)
	if err := parallel(ctx, n, concurrency, func(i int) error {
		first12 := fmt.Sprintf("77%010d", next.Add(1))
		mpan := first12 + strconv.Itoa(validation.MPANCheckDigit(first12))
		var answer struct {
			Site struct {
				SiteID string `json:"site_id"`
			} `json:"site"`
		}
		if err := call(api.URL, "POST", "/entities/site/onboard", token, onboardBody(mpan), &answer); err != nil {
			return err
		}
		ids[i] = answer.Site.SiteID
		if connection {
			return call(api.URL, "POST", "/entities/site/"+ids[i]+"/token", token, map[string]any{
				"access_token": "at-" + uuid.NewString(), "refresh_token": "rt-" + uuid.NewString(),
				"token_type": "Bearer", "expires_in": 30 * 24 * 3600}, nil)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("onboarding: %w", err)
	}
	log.Printf("%d onboards in %s", n, time.Since(start).Round(time.Millisecond))
	rewards := &rewardstore.Store{Pool: testDB.Pool}
	if err := parallel(ctx, n, concurrency, func(i int) error {
		return rewards.AppendMany(ctx, rewardstore.Site{Namespace: orgNamespace, ID: ids[i]}, yearOfRewards(weeks), rewardstore.SourceAPI)
	}); err != nil {
		return fmt.Errorf("crediting rewards: %w", err)
	}
	// Every 5 s: each look LISTs three kinds whole, which at thousands of households is work
	// enough for the API server to slow down what it waits for.
	if err := probe.Retry(ctx, 20*time.Minute, 5*time.Second, func() error { return converged(ctx, env.Client, n, weeks) }); err != nil {
		return err
	}
	log.Printf("converged %s after the first onboard", time.Since(start).Round(time.Second))
	lists, err := listLatencies(ctx, hc, apiserver, n)
	if err != nil {
		return err
	}
	if err := settle(ctx, etcd); err != nil {
		return err
	}
	withEvents, err := etcd.measure(ctx, hc, apiserver)
	if err != nil {
		return err
	}
	if err := env.Client.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace(orgNamespace)); err != nil {
		return err
	}
	if err := settle(ctx, etcd); err != nil {
		return err
	}
	after, err := etcd.measure(ctx, hc, apiserver)
	if err != nil {
		return err
	}
	report(os.Stdout, n, before, withEvents, after)
	fmt.Print(lists)
	return nil
}

// listLatencies times a full LIST of each per-household kind, as a client that is not a
// cache reads it (an informer's first list, kubectl get, a GitOps tool's diff): the raw
// answer read to its end, not decoded, so the figure is the API server's. KEP-95's scale
// targets for custom resources are set against the LIST latency objectives (p99 5 s for a
// namespace, 30 s for the cluster).
func listLatencies(ctx context.Context, hc *http.Client, host string, n int) (string, error) {
	var out strings.Builder
	fmt.Fprintf(&out, "\nLIST of the organisation's namespace, %d households, 7 tries each:\n\n", n)
	fmt.Fprintf(&out, "| kind | objects | bytes | p50 ms | max ms | µs per object (p50) |\n|---|---|---|---|---|---|\n")
	for _, resource := range []string{"sites", "assets", "enrolments", "rewardledgers", "deviceconnections"} {
		url := host + "/apis/flexsite.io/v1alpha1/namespaces/" + orgNamespace + "/" + resource
		var times []time.Duration
		var size int
		var items int
		for range 7 {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return "", err
			}
			begin := time.Now()
			resp, err := hc.Do(req)
			if err != nil {
				return "", err
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				return "", err
			}
			times = append(times, time.Since(begin))
			if resp.StatusCode != http.StatusOK {
				return "", fmt.Errorf("LIST %s: %s", resource, resp.Status)
			}
			var list struct {
				Items []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal(body, &list); err != nil {
				return "", err
			}
			size, items = len(body), len(list.Items)
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		p50 := times[len(times)/2]
		fmt.Fprintf(&out, "| %s | %d | %d | %.1f | %.1f | %.1f |\n", resource, items, size,
			float64(p50.Microseconds())/1000, float64(times[len(times)-1].Microseconds())/1000,
			float64(p50.Microseconds())/float64(max(items, 1)))
	}
	return out.String(), nil
}

// converged reports nil once every household's objects carry their settled status: the
// Site and its Enrolment Ready, the RewardLedger summarising every credit.
func converged(ctx context.Context, c client.Client, n, weeks int) error {
	sites := &flexv1.SiteList{}
	if err := c.List(ctx, sites, client.InNamespace(orgNamespace)); err != nil {
		return err
	}
	enrolments := &flexv1.EnrolmentList{}
	if err := c.List(ctx, enrolments, client.InNamespace(orgNamespace)); err != nil {
		return err
	}
	ledgers := &flexv1.RewardLedgerList{}
	if err := c.List(ctx, ledgers, client.InNamespace(orgNamespace)); err != nil {
		return err
	}
	ready := 0
	for _, s := range sites.Items {
		if ok := readyAt(s.Status.Conditions, s.Generation); ok {
			ready++
		}
	}
	active := 0
	for _, e := range enrolments.Items {
		if e.Status.Phase == flexv1.EnrolmentActive {
			active++
		}
	}
	summarised := 0
	for _, l := range ledgers.Items {
		if ptr.Deref(l.Status.TransactionCount, 0) == int64(weeks) {
			summarised++
		}
	}
	if ready != n || active != n || summarised != n {
		return fmt.Errorf("of %d households: %d Sites ready, %d Enrolments active, %d ledgers summarised", n, ready, active, summarised)
	}
	return nil
}

func readyAt(conds []metav1.Condition, generation int64) bool {
	for _, c := range conds {
		if c.Type == flexv1.ReadyCondition {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
		}
	}
	return false
}

// settle waits until etcd's revision stops moving for the objects' sake (the API server's own
// leases still write every 10 s or so), then compacts away every older revision and
// defragments, so that the database in use holds the live keys only.
func settle(ctx context.Context, etcd etcdAPI) error {
	var last int64
	stable := 0
	for stable < 3 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
		st, err := etcd.status(ctx)
		if err != nil {
			return err
		}
		if st.revision-last <= 5 {
			stable++
		} else {
			stable = 0
		}
		last = st.revision
	}
	compaction := map[string]any{"revision": strconv.FormatInt(last, 10), "physical": true}
	if err := etcd.post(ctx, "/v3/kv/compaction", compaction, nil); err != nil && !strings.Contains(err.Error(), "compacted") {
		return err
	}
	return etcd.post(ctx, "/v3/maintenance/defragment", map[string]any{}, nil)
}

// snapshot is etcd's database in use and its keys, by resource: the key's path below
// /registry/ up to the namespace ("flexsite.io/sites", "events", "secrets").
type snapshot struct {
	inUse, total int64
	byResource   map[string]*usage
	// rss is the resident memory of this process's children, by command name (etcd,
	// kube-apiserver): the API server's watch cache holds every object decoded, etcd its
	// key index.
	rss map[string]int64
	// apiserver is a few of kube-apiserver's own gauges: its Go heap, and its watch caches'
	// capacity (the recent events each keeps, besides the objects).
	apiserver map[string]float64
}

type usage struct{ keys, keyBytes, valueBytes int64 }

func (s snapshot) keys() int64 {
	var k int64
	for _, u := range s.byResource {
		k += u.keys
	}
	return k
}

// report prints what the households added, per household.
func report(w io.Writer, n int, before, withEvents, after snapshot) {
	per := func(v int64) float64 { return float64(v) / float64(n) }
	names := map[string]bool{}
	for _, s := range []snapshot{before, withEvents, after} {
		for r := range s.byResource {
			names[r] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for r := range names {
		sorted = append(sorted, r)
	}
	sort.Strings(sorted)
	fmt.Fprintf(w, "\n%d households; per household, what etcd holds after compaction and defragmentation:\n\n", n)
	fmt.Fprintf(w, "| resource | keys | key bytes | value bytes |\n|---|---|---|---|\n")
	var keys, keyBytes, valueBytes int64
	for _, r := range sorted {
		u, b := withEvents.byResource[r], before.byResource[r]
		if u == nil {
			u = &usage{}
		}
		if b == nil {
			b = &usage{}
		}
		if u.keys == b.keys && u.valueBytes == b.valueBytes {
			continue
		}
		dk, dkb, dvb := u.keys-b.keys, u.keyBytes-b.keyBytes, u.valueBytes-b.valueBytes
		keys, keyBytes, valueBytes = keys+dk, keyBytes+dkb, valueBytes+dvb
		fmt.Fprintf(w, "| %s | %.2f | %.0f | %.0f |\n", r, per(dk), per(dkb), per(dvb))
	}
	fmt.Fprintf(w, "| all | %.2f | %.0f | %.0f |\n\n", per(keys), per(keyBytes), per(valueBytes))
	fmt.Fprintf(w, "etcd database in use, per household: %.0f bytes with the onboards' Events, %.0f without "+
		"(%.0f bytes of values and keys without Events)\n",
		per(withEvents.inUse-before.inUse), per(after.inUse-before.inUse),
		per(keyBytes+valueBytes)-per(eventBytes(withEvents)-eventBytes(before)))
	fmt.Fprintf(w, "etcd database in use: %d bytes before, %d with the households (%d with Events); total size %d\n",
		before.inUse, after.inUse, withEvents.inUse, after.total)
	for _, name := range []string{"etcd", "kube-apiserver"} {
		fmt.Fprintf(w, "%s resident memory: %.0f MiB before, %.0f after (%.0f with Events): %.1f KiB per household\n", name,
			float64(before.rss[name])/(1<<20), float64(after.rss[name])/(1<<20), float64(withEvents.rss[name])/(1<<20),
			per(after.rss[name]-before.rss[name])/1024)
	}
	gauges := make([]string, 0, len(after.apiserver))
	for g := range after.apiserver {
		gauges = append(gauges, g)
	}
	sort.Strings(gauges)
	for _, g := range gauges {
		fmt.Fprintf(w, "kube-apiserver %s: %.0f before, %.0f after (%.0f with Events): %.1f per household\n", g,
			before.apiserver[g], after.apiserver[g], withEvents.apiserver[g], (after.apiserver[g]-before.apiserver[g])/float64(n))
	}
	perHousehold := per(after.inUse - before.inUse)
	fmt.Fprintf(w, "households in 8 GiB at that figure: %.0f; in the default 2 GiB quota: %.0f\n",
		8*float64(1<<30)/perHousehold, 2*float64(1<<30)/perHousehold)
}

func eventBytes(s snapshot) int64 {
	if u := s.byResource["events"]; u != nil {
		return u.keyBytes + u.valueBytes
	}
	return 0
}

// scrapeGauges reads the Go heap gauges and the flexsite.io watch caches' capacity from a
// Prometheus text endpoint, by series ("name{label=\"value\",...}").
func scrapeGauges(ctx context.Context, hc *http.Client, url string) (map[string]float64, error) {
	samples, err := probe.Fetch(ctx, hc, url, "go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes",
		"process_resident_memory_bytes", "apiserver_watch_cache_capacity")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		series := s.Name
		if len(s.Labels) > 0 {
			labels := make([]string, 0, len(s.Labels))
			for k, v := range s.Labels {
				labels = append(labels, k+"="+strconv.Quote(v))
			}
			sort.Strings(labels)
			series += "{" + strings.Join(labels, ",") + "}"
		}
		if s.Name == "apiserver_watch_cache_capacity" && !strings.Contains(series, "flexsite.io") {
			continue
		}
		out[series] = s.Value
	}
	return out, nil
}

// childrenRSS is the resident memory of this process's child processes, by command name.
func childrenRSS() map[string]int64 {
	out := map[string]int64{}
	dirs, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after its closing bracket.
		open, closing := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || closing < open {
			continue
		}
		fields := strings.Fields(string(stat[closing+1:]))
		if len(fields) < 2 || fields[1] != self {
			continue
		}
		status, err := os.ReadFile("/proc/" + d.Name() + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(status)) {
			if value, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
				out[string(stat[open+1:closing])] += kb * 1024
			}
		}
	}
	return out
}

// etcdAPI speaks to etcd's gRPC gateway (JSON over HTTP, on the client URL), so this tool
// needs no etcd client library.
type etcdAPI struct{ base string }

type etcdStatus struct{ revision, dbSize, dbSizeInUse int64 }

func (e etcdAPI) status(ctx context.Context) (etcdStatus, error) {
	var out struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
		DBSize      string `json:"dbSize"`
		DBSizeInUse string `json:"dbSizeInUse"`
	}
	if err := e.post(ctx, "/v3/maintenance/status", map[string]any{}, &out); err != nil {
		return etcdStatus{}, err
	}
	var st etcdStatus
	var err error
	for _, f := range []struct {
		s string
		v *int64
	}{{out.Header.Revision, &st.revision}, {out.DBSize, &st.dbSize}, {out.DBSizeInUse, &st.dbSizeInUse}} {
		if *f.v, err = strconv.ParseInt(f.s, 10, 64); err != nil {
			return etcdStatus{}, fmt.Errorf("etcd status %+v: %w", out, err)
		}
	}
	return st, nil
}

// measure reads the database size and every key under /registry/, a page at a time.
func (e etcdAPI) measure(ctx context.Context, hc *http.Client, apiserver string) (snapshot, error) {
	st, err := e.status(ctx)
	if err != nil {
		return snapshot{}, err
	}
	gauges, err := scrapeGauges(ctx, hc, apiserver+"/metrics")
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{inUse: st.dbSizeInUse, total: st.dbSize, byResource: map[string]*usage{}, rss: childrenRSS(), apiserver: gauges}
	from, end := []byte("/registry/"), []byte("/registry0") // '0' follows '/'
	for {
		var out struct {
			KVs []struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			} `json:"kvs"`
			More bool `json:"more"`
		}
		if err := e.post(ctx, "/v3/kv/range", map[string]any{"key": from, "range_end": end, "limit": 500,
			"revision": strconv.FormatInt(st.revision, 10)}, &out); err != nil {
			return snapshot{}, err
		}
		for _, kv := range out.KVs {
			key, err := base64.StdEncoding.DecodeString(kv.Key)
			if err != nil {
				return snapshot{}, err
			}
			value, err := base64.StdEncoding.DecodeString(kv.Value)
			if err != nil {
				return snapshot{}, err
			}
			r := resourceOf(string(key))
			u := s.byResource[r]
			if u == nil {
				u = &usage{}
				s.byResource[r] = u
			}
			u.keys++
			u.keyBytes += int64(len(key))
			u.valueBytes += int64(len(value))
			from = append(key, 0)
		}
		if !out.More || len(out.KVs) == 0 {
			return s, nil
		}
	}
}

// resourceOf is a key's resource: "/registry/flexsite.io/sites/ns/name" → "flexsite.io/sites",
// "/registry/events/ns/name" → "events".
func resourceOf(key string) string {
	parts := strings.Split(strings.TrimPrefix(key, "/registry/"), "/")
	if strings.Contains(parts[0], ".") && len(parts) > 1 {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

func (e etcdAPI) post(ctx context.Context, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s %s", path, resp.Status, answer)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer, out)
}

// onboardBody is the bench's household (cmd/flexsite-bench/households.go).
func onboardBody(mpan string) map[string]any {
	return map[string]any{
		"site": map[string]any{"mpan": mpan, "postcode": "SW1A 1AA", "street_address": "1 Bench Street",
			"email": "resident@example.com", "gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
		"assets": []any{
			map[string]any{"external_id": "charger-" + mpan, "type": "charger", "asset_model": "zappi",
				"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}},
			map[string]any{"external_id": "battery-" + mpan, "type": "battery",
				"properties": map[string]any{"power_kw": 5, "capacity_kwh": 13.5}},
		},
		"proposition": string(flexv1.PropositionLimitedPause),
	}
}

// yearOfRewards is the bench's year of weekly "flex period" credits.
func yearOfRewards(weeks int) []flexv1.RewardTransaction {
	start := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)
	txs := make([]flexv1.RewardTransaction, weeks)
	for i := range txs {
		from := start.AddDate(0, 0, 7*i)
		to := from.AddDate(0, 0, 7)
		txs[i] = flexv1.RewardTransaction{ID: uuid.NewString(), Type: "flex period", CreditPence: int64(20 + (i*37)%180),
			StartTime: &metav1.Time{Time: from}, EndTime: &metav1.Time{Time: to},
			SettlementDate: to.AddDate(0, 0, 5).Format(time.DateOnly), FlexWh: ptr.To(int64(1500 + 10*i))}
	}
	return txs
}

func login(base string) (string, error) {
	status, body, err := testenv.Call(base, "POST", "/auth/token-form", "",
		testenv.Form{"username": "etcdcost", "password": "etcdcost-password", "grant_type": "password"})
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("login: %d %s", status, body)
	}
	var answer struct {
		AccessToken string `json:"access_token"`
	}
	return answer.AccessToken, json.Unmarshal(body, &answer)
}

func call(base, method, path, token string, body, out any) error {
	status, answer, err := testenv.Call(base, method, path, token, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, status, answer)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer, out)
}

// parallel runs do(0..n-1) on c workers and answers the first error.
func parallel(ctx context.Context, n, c int, do func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, c)
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
