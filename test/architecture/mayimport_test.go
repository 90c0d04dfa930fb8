package architecture

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// row is one row of docs/architecture.md's package map: the packages it names and which of
// our packages they may import (each entry: that package or any below it). A package may
// always import the packages below itself.
type row struct {
	pkgs []string
	may  []string
	// except: packages that may not be imported although may names a parent of them.
	except []string
}

var (
	apiTypes  = []string{"api/v1alpha1"}
	pureRules = []string{"internal/eligibility", "internal/validation", "internal/claim", "internal/units",
		"internal/identity", "internal/settlement", "internal/dispatch", "internal/prices", "internal/evschedule",
		"internal/batteryschedule", "internal/ocpp", "internal/meters"}
	// helpers: the map's "the rest" that sit below the use cases: tokens, cache keys, compact
	// ledgers, metrics, mail, bootstrap, key rings, kept-while-listening caches, the claim protocol, the local control plane and the suites' envtest.
	helpers = []string{"internal/auth", "internal/index", "internal/ledger", "internal/priority", "internal/metrics",
		"internal/mail", "internal/tenancy", "internal/record", "internal/resourceversion", "internal/embedded",
		"internal/bootstrap", "internal/testenv", "internal/testing/oauthprovider", "internal/shards", "internal/statuswrites", "internal/keyring", "internal/keptcache", "internal/claiming"}
	httpDoors = []string{"internal/restapi", "internal/hostedflow", "internal/rewardspage", "internal/devicecallback", "internal/openadr"}
)

func join(groups ...[]string) []string { return slices.Concat(groups...) }

// packageMap is docs/architecture.md's table, as data. TestMayImport checks every import of
// every non-test file against it; TestPackageMapMatchesDoc checks it names the same packages
// as the document's table.
var packageMap = []row{
	{pkgs: apiTypes},
	{pkgs: pureRules, may: join(apiTypes, pureRules)},
	{pkgs: []string{"internal/household"}, may: join(apiTypes, pureRules)},
	{pkgs: []string{"internal/householdstore"}, may: join(apiTypes, pureRules, []string{"internal/household", "internal/index", "internal/claiming"})},
	{pkgs: []string{"internal/app"}, may: join(apiTypes, pureRules, []string{"internal/household", "internal/householdstore",
		"internal/auth", "internal/index", "internal/metrics", "internal/record", "internal/resourceversion"})},
	{pkgs: []string{"internal/app/rewards", "internal/app/subscriptions", "internal/app/flexevents"},
		may: join(apiTypes, pureRules, []string{"internal/app", "internal/auth", "internal/household", "internal/householdstore",
			"internal/record", "internal/metrics", "internal/mail", "internal/ledger", "internal/events", "internal/db",
			"internal/rewardstore", "internal/pagestore", "internal/settlementstore", "internal/outboxstore",
			"internal/dispatchstore", "internal/keptcache"}),
		except: []string{"internal/app/devices", "internal/app/readings", "internal/app/dispatches", "internal/app/assetevents"}},
	{pkgs: []string{"internal/app/dispatches", "internal/app/assetevents"}, may: join(apiTypes, pureRules, []string{"internal/app",
		"internal/auth", "internal/index", "internal/householdstore", "internal/db", "internal/dispatchstore",
		"internal/asseteventstore"}), except: []string{"internal/app/"}},
	{pkgs: []string{"internal/app/pricing"}, may: join(apiTypes, pureRules, []string{"internal/app",
		"internal/auth", "internal/index", "internal/household", "internal/householdstore", "internal/db", "internal/pricestore",
		"internal/schedulestore", "internal/dispatchstore", "internal/asseteventstore", "internal/metrics", "internal/keptcache"}), except: []string{"internal/app/"}},
	{pkgs: []string{"internal/app/meterpoints"}, may: join(apiTypes, pureRules, []string{"internal/app",
		"internal/auth", "internal/db", "internal/sealing", "internal/keyring", "internal/metrics"}), except: []string{"internal/app/"}},
	{pkgs: []string{"internal/app/devices"}, may: join(apiTypes, pureRules, []string{"internal/app", "internal/auth",
		"internal/deviceauth", "internal/household", "internal/index"}), except: []string{"internal/app/"}},
	{pkgs: []string{"internal/deviceauth"}, may: join(apiTypes, pureRules, []string{"internal/events"})},
	{pkgs: []string{"internal/app/readings"}, may: join(apiTypes, pureRules, []string{"internal/app", "internal/auth",
		"internal/db", "internal/householdstore", "internal/index"}), except: []string{"internal/app/"}},
	{pkgs: []string{"internal/web"}, may: join(apiTypes, pureRules, []string{"internal/app", "internal/auth", "internal/metrics"}),
		except: []string{"internal/app/"}},
	{pkgs: []string{"internal/web/flexchart"}, may: join(apiTypes, pureRules, []string{"internal/app/flexevents",
		"internal/settlementstore", "internal/household"})},
	{pkgs: []string{"internal/web/batterychart"}, may: join(apiTypes, pureRules, []string{"internal/household"})},
	{pkgs: []string{"internal/web/jsonappend"}},
	{pkgs: []string{"internal/app/apptest"}, may: join(apiTypes, []string{"internal/app", "internal/auth", "internal/testenv",
		"internal/db/dbtest"}), except: []string{"internal/app/"}},
	{pkgs: []string{"internal/web/webtest"}, may: []string{"internal/app", "internal/web"}, except: []string{"internal/app/"}},
	{pkgs: []string{"internal/restapi"}, may: join(apiTypes, pureRules, []string{"internal/app", "internal/web", "internal/auth",
		"internal/events", "internal/household", "internal/metrics"})},
	{pkgs: []string{"internal/openadr"}, may: join(apiTypes, pureRules, []string{"internal/app", "internal/web", "internal/auth",
		"internal/events", "internal/household", "internal/metrics"})},
	{pkgs: []string{"internal/app/vtn"}, may: join(apiTypes, pureRules, []string{"internal/app", "internal/auth", "internal/db",
		"internal/index", "internal/household", "internal/householdstore", "internal/vtnstore", "internal/dispatchstore",
		"internal/pricestore", "internal/outboxstore", "internal/events", "internal/record", "internal/metrics"})},
	{pkgs: []string{"internal/vtnstore"}, may: join(apiTypes, pureRules, []string{"internal/db", "internal/events"})},
	{pkgs: []string{"internal/hostedflow"}, may: join(apiTypes, pureRules, []string{"internal/app", "internal/web",
		"internal/auth", "internal/household"})},
	{pkgs: []string{"internal/rewardspage"}, may: join(apiTypes, pureRules, []string{"internal/app", "internal/app/rewards",
		"internal/app/flexevents", "internal/web", "internal/ledger", "internal/household"}), except: []string{"internal/app/devices",
		"internal/app/readings", "internal/app/subscriptions"}},
	{pkgs: []string{"internal/devicecallback"}, may: []string{"internal/app/devices", "internal/web"}},
	{pkgs: []string{"controllers"}, may: join(apiTypes, pureRules, []string{"internal/household", "internal/householdstore",
		"internal/settlementstore", "internal/pagestore", "internal/rewardstore", "internal/outboxstore", "internal/db",
		"internal/dispatchstore", "internal/asseteventstore", "internal/bootstrap", "internal/deviceauth", "internal/events", "internal/index", "internal/metrics",
		"internal/priority", "internal/record", "internal/resourceversion", "internal/shards", "internal/statuswrites"})},
	{pkgs: []string{"webhook"}, may: join(apiTypes, pureRules, []string{"internal/household", "internal/householdstore",
		"internal/index", "internal/tenancy"})},
	{pkgs: []string{"internal/events"}, may: join(apiTypes, pureRules, []string{"internal/record"})},
	{pkgs: []string{"internal/outboxstore"}, may: join(apiTypes, []string{"internal/db", "internal/events"})},
	{pkgs: []string{"internal/db"}},
	{pkgs: []string{"internal/probe"}},
	{pkgs: []string{"internal/rewardstore"}, may: join(apiTypes, []string{"internal/db", "internal/household", "internal/record",
		"internal/ledger"})},
	{pkgs: []string{"internal/pagestore"}, may: []string{"internal/db", "internal/sealing"}},
	{pkgs: []string{"internal/sealing"}, may: []string{"internal/keyring"}},
	{pkgs: []string{"internal/meterstore"}, may: join(pureRules, []string{"internal/db"})},
	{pkgs: []string{"internal/settlementstore"}, may: join(apiTypes, []string{"internal/db", "internal/settlement",
		"internal/events", "internal/rewardstore"})},
	{pkgs: []string{"internal/dispatchstore"}, may: join(apiTypes, pureRules, []string{"internal/db", "internal/events", "internal/outboxstore"})},
	{pkgs: []string{"internal/asseteventstore"}, may: join(apiTypes, pureRules, []string{"internal/db"})},
	{pkgs: []string{"internal/pricestore"}, may: join(apiTypes, pureRules, []string{"internal/db"})},
	{pkgs: []string{"internal/schedulestore"}, may: []string{"internal/db"}},
	{pkgs: []string{"internal/delivery"}, may: join(apiTypes, []string{"internal/events", "internal/outboxstore",
		"internal/metrics"})},
	{pkgs: []string{"internal/server"}, may: join(apiTypes, []string{"internal"}),
		except: []string{"internal/testenv", "internal/testing", "internal/db/dbtest"}},
	{pkgs: helpers, may: join(apiTypes, pureRules, []string{"internal/household"}, helpers)},
	// The commands. cmd/manager registers the controllers and webhooks and builds everything
	// else through internal/server, which mounts the HTTP doors.
	{pkgs: []string{"cmd/manager"}, may: join(apiTypes, []string{"internal", "controllers", "webhook"}),
		except: join(httpDoors, []string{"internal/web", "internal/testenv", "internal/testing", "internal/db/dbtest"})},
	{pkgs: []string{"cmd/flexsite-admin"}, may: join(apiTypes, pureRules, []string{"internal/household", "internal/db",
		"internal/index", "internal/rewardstore", "internal/meterstore"}), except: []string{"internal/db/dbtest"}},
	{pkgs: []string{"cmd/flexsite-bench"}, may: join(apiTypes, pureRules, []string{"internal/household", "internal/bootstrap", "internal/probe",
		"internal/db", "internal/embedded", "internal/rewardstore", "internal/settlementstore", "internal/dispatchstore",
		"internal/asseteventstore", "internal/pricestore", "internal/meterstore", "internal/server", "internal/shards", "internal/vtnstore"})},
	// cmd/main.go: kubebuilder's placeholder, never built (docs/development.md, "Scaffolding").
	{pkgs: []string{"cmd"}},
}

// mapped reports whether dir is ours and under the package map (the suites under test/ and
// the tools under hack/ may import what they test).
func mapped(dir string) bool {
	return dir == "controllers" || dir == "webhook" || under(dir, "internal") || under(dir, "cmd") || under(dir, "api")
}

// rowOf answers the row whose package is dir, or the nearest above it.
func rowOf(dir string) (row, string, bool) {
	best, key := row{}, ""
	for _, r := range packageMap {
		for _, p := range r.pkgs {
			if under(dir, p) && len(p) > len(key) {
				best, key = r, p
			}
		}
	}
	return best, key, key != ""
}

// allowed reports whether the package of row key may import local.
func (r row) allowed(key, local string) bool {
	if under(local, key) {
		return true
	}
	// An entry with a trailing slash excepts only the packages strictly below it.
	if slices.ContainsFunc(r.except, func(e string) bool {
		if strings.HasSuffix(e, "/") {
			return strings.HasPrefix(local, e)
		}
		return under(local, e)
	}) {
		return false
	}
	return slices.ContainsFunc(r.may, func(m string) bool { return under(local, m) })
}

// Every import of ours of every non-test file is one its row of the package map allows, and
// every package of ours has a row.
func TestMayImport(t *testing.T) {
	all := imports(t)
	if len(all["cmd/manager"]) == 0 || len(all["controllers"]) == 0 {
		t.Fatal("found no imports of cmd/manager or controllers: is the test run from test/architecture?")
	}
	dirs := make([]string, 0, len(all))
	for dir := range all {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		if !mapped(dir) {
			continue
		}
		r, key, ok := rowOf(dir)
		if !ok {
			t.Errorf("%s has no row in docs/architecture.md's package map (and packageMap here): say what it may import", dir)
			continue
		}
		for _, imp := range all[dir] {
			local, ok := strings.CutPrefix(imp, module)
			if ok && !r.allowed(key, local) {
				t.Errorf("%s imports %s, which its row of the package map (%s) does not allow", dir, local, key)
			}
		}
	}
}

// The rows of a few packages, as the map says: a guard that packageMap itself reads the way
// the document does (a row that allowed everything would pass TestMayImport).
func TestPackageMapRows(t *testing.T) {
	for _, c := range []struct {
		from, imp string
		ok        bool
	}{
		{"internal/restapi", "internal/hostedflow", false},
		{"internal/restapi", "internal/app/rewards", true},
		{"internal/app", "internal/web", false},
		{"internal/app/rewards", "internal/app/devices", false},
		{"internal/app/devices", "internal/app", true},
		{"internal/app/devices", "internal/app/rewards", false},
		{"internal/web", "internal/app", true},
		{"internal/web", "internal/app/rewards", false},
		{"controllers", "internal/app", false},
		{"controllers", "webhook", false},
		{"webhook", "internal/app", false},
		{"webhook", "controllers", false},
		{"internal/household", "internal/householdstore", false},
		{"internal/eligibility", "internal/db", false},
		{"internal/db/dbtest", "internal/db/pgserver", true},
		{"internal/db", "internal/events", false},
		{"cmd/manager", "internal/restapi", false},
		{"cmd/manager", "internal/server", true},
		{"cmd/manager", "webhook", true},
		{"cmd/manager", "internal/testenv", false},
		{"cmd/flexsite-admin", "internal/app", false},
		{"cmd/flexsite-bench", "internal/restapi", false},
		{"internal/server", "internal/restapi", true},
		{"internal/server", "controllers", false},
		{"internal/auth", "internal/app", false},
		{"internal/testenv", "internal/bootstrap", true},
	} {
		r, key, ok := rowOf(c.from)
		if !ok {
			t.Errorf("%s has no row", c.from)
			continue
		}
		if got := r.allowed(key, c.imp); got != c.ok {
			t.Errorf("%s may import %s: %v, want %v", c.from, c.imp, got, c.ok)
		}
	}
}

var backticked = regexp.MustCompile("`([^`]+)`")

// The first column of docs/architecture.md's package map names the same packages as
// packageMap: a row added to one is added to the other.
func TestPackageMapMatchesDoc(t *testing.T) {
	root, _ := filepath.Abs("../..")
	data, err := os.ReadFile(filepath.Join(root, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "## Package map")
	if !ok {
		t.Fatal("docs/architecture.md has no \"## Package map\"")
	}
	// The map is the section's table: later sections have tables of their own.
	table, _, _ = strings.Cut(table, "\n## ")
	inDoc := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			inDoc[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	inTest := map[string]bool{}
	for _, r := range packageMap {
		for _, p := range r.pkgs {
			inTest[p] = true
		}
	}
	for p := range inDoc {
		if !inTest[p] {
			t.Errorf("docs/architecture.md's package map has a row for %s; packageMap here has none", p)
		}
	}
	for p := range inTest {
		if !inDoc[p] {
			t.Errorf("packageMap has a row for %s; docs/architecture.md's package map has none", p)
		}
	}
}
