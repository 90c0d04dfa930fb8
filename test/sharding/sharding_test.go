package sharding_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	shardingv1alpha1 "github.com/timebertt/kubernetes-controller-sharding/pkg/apis/sharding/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/shards"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/internal/validation"
)

// mpan is the i-th valid MPAN of this suite.
func mpan(i int) string {
	first12 := fmt.Sprintf("%012d", 161000000000+i)
	return fmt.Sprintf("%s%d", first12, validation.MPANCheckDigit(first12))
}

// declareHousehold writes a site and its charger as kubectl or GitOps does: no controller
// reference on the charger (the Site controller adopts it, which puts it on the site's shard).
func declareHousehold(ctx context.Context, ns string, i int) client.ObjectKey {
	GinkgoHelper()
	m := mpan(i)
	name := identity.SiteNameForMPAN(m)
	Expect(env.Client.Create(ctx, &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flexv1.SiteSpec{MPAN: m, Postcode: "M1 1AE"}})).To(Succeed())
	Expect(env.Client.Create(ctx, &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.AssetName("charger-" + m)},
		Spec: flexv1.AssetSpec{SiteName: name, ExternalID: "charger-" + m, Type: flexv1.AssetTypeCharger,
			Model: "zappi", InstallationDate: "2025-06-15", PowerW: ptr.To[int64](7400)}})).To(Succeed())
	return client.ObjectKey{Namespace: ns, Name: name}
}

// converged reports whether every site's status is of its current spec, Ready, and its
// charger is controlled by it and on its shard (one list of each kind, not a read per site).
func converged(ctx context.Context, keys []client.ObjectKey) error {
	_, err := convergence(ctx, keys)
	return err
}

// convergence counts the sites that have converged (converged's terms), and says why the
// first that has not has not.
func convergence(ctx context.Context, keys []client.ObjectKey) (int, error) {
	byName := map[client.ObjectKey]*flexv1.Site{}
	chargers := map[client.ObjectKey][]*flexv1.Asset{}
	for _, ns := range namespacesOf(keys) {
		sites, assets := &flexv1.SiteList{}, &flexv1.AssetList{} // fresh: the maps point into them
		if err := env.Client.List(ctx, sites, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		for i := range sites.Items {
			byName[client.ObjectKeyFromObject(&sites.Items[i])] = &sites.Items[i]
		}
		if err := env.Client.List(ctx, assets, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		for i := range assets.Items {
			a := &assets.Items[i]
			key := client.ObjectKey{Namespace: ns, Name: a.Spec.SiteName}
			chargers[key] = append(chargers[key], a)
		}
	}
	done := 0
	var first error
	for _, key := range keys {
		if err := siteConverged(key, byName[key], chargers[key]); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		done++
	}
	return done, first
}

func siteConverged(key client.ObjectKey, site *flexv1.Site, chargers []*flexv1.Asset) error {
	if site == nil {
		return fmt.Errorf("site %s: not found", key)
	}
	ready := meta.FindStatusCondition(site.Status.Conditions, flexv1.ReadyCondition)
	switch {
	case shards.ShardOf(site) == "":
		return fmt.Errorf("site %s: not assigned", key)
	case site.Status.ObservedGeneration != site.Generation:
		return fmt.Errorf("site %s: status of generation %d, spec at %d", key, site.Status.ObservedGeneration, site.Generation)
	case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != site.Generation:
		return fmt.Errorf("site %s: not Ready at generation %d: %+v", key, site.Generation, ready)
	case len(chargers) != 1:
		return fmt.Errorf("site %s: %d chargers", key, len(chargers))
	}
	a := chargers[0]
	owner := metav1.GetControllerOf(a)
	if owner == nil || owner.Kind != "Site" || owner.Name != site.Name || owner.UID != site.UID {
		return fmt.Errorf("asset %s: controller %+v, want site %s", a.Name, owner, site.Name)
	}
	if shards.ShardOf(a) != shards.ShardOf(site) {
		return fmt.Errorf("asset %s on shard %q, its site on %q", a.Name, shards.ShardOf(a), shards.ShardOf(site))
	}
	return nil
}

func namespacesOf(keys []client.ObjectKey) []string {
	var nss []string
	for _, k := range keys {
		if !slices.Contains(nss, k.Namespace) {
			nss = append(nss, k.Namespace)
		}
	}
	return nss
}

// owned groups the sites by the shard that holds them (one list per namespace).
func owned(g Gomega, ctx context.Context, keys []client.ObjectKey) map[string][]client.ObjectKey {
	GinkgoHelper()
	shardOf := map[client.ObjectKey]string{}
	for _, ns := range namespacesOf(keys) {
		sites := &flexv1.SiteList{}
		g.Expect(env.Client.List(ctx, sites, client.InNamespace(ns))).To(Succeed())
		for i := range sites.Items {
			shardOf[client.ObjectKeyFromObject(&sites.Items[i])] = shards.ShardOf(&sites.Items[i])
		}
	}
	by := map[string][]client.ObjectKey{}
	for _, key := range keys {
		by[shardOf[key]] = append(by[shardOf[key]], key)
	}
	return by
}

// change edits a site's spec (its postcode, between two), which its status must then follow.
func change(ctx context.Context, key client.ObjectKey) error {
	site := &flexv1.Site{}
	if err := env.Client.Get(ctx, key, site); err != nil {
		return err
	}
	patch := client.MergeFrom(site.DeepCopy())
	if site.Spec.Postcode == "M1 1AE" {
		site.Spec.Postcode = "SW1A 1AA"
	} else {
		site.Spec.Postcode = "M1 1AE"
	}
	return env.Client.Patch(ctx, site, patch)
}

// changeAt changes the sites in turn, perSecond of them a second, until stop is closed.
func changeAt(ctx context.Context, keys []client.ObjectKey, perSecond int, stop <-chan struct{}) (changed func() int) {
	var (
		mu sync.Mutex
		n  int
	)
	go func() {
		defer GinkgoRecover()
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := change(ctx, keys[i%len(keys)]); ctx.Err() != nil {
				return // the spec ended (it failed elsewhere)
			} else {
				Expect(err).NotTo(HaveOccurred())
			}
			mu.Lock()
			n++
			mu.Unlock()
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

var _ = Describe("Shards of the ring", Ordered, func() {
	var (
		sharder *process
		api     *process
		a, b    *process
		ns      string
		keys    []client.ObjectKey
	)

	BeforeAll(func(ctx SpecContext) {
		sharder = startSharder(ctx)
		api = startAPI(ctx, "api-0")
		a = startShard(ctx, "shard-a", false)
		var err error
		ns, err = env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			ring := shards.Ring()
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ring), ring); err != nil {
				return err
			}
			if ring.Status.AvailableShards != 1 {
				return fmt.Errorf("%d shards available", ring.Status.AvailableShards)
			}
			return nil
		}).Should(Succeed())
	}, NodeTimeout(2*time.Minute))

	AfterEach(func() {
		Expect(reconciles.seen()).To(BeEmpty(), "reconciles of one object on two shards at once")
		foreign, examined := foreignWrites()
		Expect(examined).To(BeNumerically(">", 0), "the audit log holds the shards' writes")
		Expect(foreign).To(BeEmpty(), "writes by a shard to objects it did not own (the audit log)")
	})

	It("assigns every household to a shard, its charger with its site, and reconciles it there", func(ctx SpecContext) {
		for i := range 500 {
			keys = append(keys, declareHousehold(ctx, ns, i))
		}
		Eventually(func() error { return converged(ctx, keys) }).WithTimeout(4 * time.Minute).Should(Succeed())
		Expect(owned(Default, ctx, keys)).To(HaveKeyWithValue("shard-a", HaveLen(500)))
	}, NodeTimeout(6*time.Minute))

	It("adds a second shard while 500 sites change at 20/s: no overlap, no foreign write, every site converged within 30 s",
		func(ctx SpecContext) {
			stop := make(chan struct{})
			stopOnce := sync.OnceFunc(func() { close(stop) })
			DeferCleanup(stopOnce)
			changed := changeAt(ctx, keys, 20, stop)
			// Two seconds of changes first (the patches are the load, not what is measured: a
			// loaded machine may take longer to send them).
			Eventually(changed).WithTimeout(time.Minute).Should(BeNumerically(">=", 40))
			b = startShard(ctx, "shard-b", true)
			Eventually(func(g Gomega) int { return len(owned(g, ctx, keys)["shard-b"]) }).WithTimeout(30*time.Second).
				Should(BeNumerically(">", 0), "the sharder moves sites to the new shard")
			Eventually(changed).WithTimeout(2 * time.Minute).Should(BeNumerically(">=", 200))
			stopOnce()
			Eventually(func() error { return converged(ctx, keys) }).WithTimeout(30 * time.Second).Should(Succeed())
			by := owned(Default, ctx, keys)
			Expect(by).To(HaveLen(2))
			for shard, held := range by {
				Expect(len(held)).To(BeNumerically(">=", 150), "shard %s holds %d of 500 sites", shard, len(held))
				fmt.Fprintf(GinkgoWriter, "balance: %s holds %d of %d sites\n", shard, len(held), len(keys))
			}
			Expect(reconciles.count("shard-b")).To(BeNumerically(">", 0))
		}, NodeTimeout(5*time.Minute))

	It("reconciles a write through the API tier on its site's shard, and no shard caches another shard's households",
		func(ctx SpecContext) {
			org := "org-tiers"
			Expect(bootstrap.EnsureOrganisation(ctx, env.Client, bootstrap.Organisation{
				Namespace: org, Username: "tiers-app", Password: "tiers-password",
				Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents}})).To(Succeed())
			var token string
			Eventually(func(g Gomega) {
				status, body := call(api, "POST", "/auth/token-form", "", url.Values{
					"username": {"tiers-app"}, "password": {"tiers-password"}, "grant_type": {"password"}})
				g.Expect(status).To(Equal(http.StatusOK), "%v", body)
				token, _ = body["access_token"].(string)
			}).Should(Succeed())
			m := mpan(2000)
			status, body := call(api, "POST", "/entities/site/onboard", token, onboardRequest(m))
			Expect(status).To(Equal(http.StatusOK), "%v", body)
			key := client.ObjectKey{Namespace: org, Name: identity.SiteNameForMPAN(m)}
			// The site is assigned to a shard, and only that shard reconciles it.
			Eventually(func(g Gomega) {
				site := &flexv1.Site{}
				g.Expect(env.Client.Get(ctx, key, site)).To(Succeed())
				owner := shards.ShardOf(site)
				g.Expect(owner).To(BeElementOf("shard-a", "shard-b"))
				g.Expect(site.Status.ObservedGeneration).To(Equal(site.Generation))
				g.Expect(meta.FindStatusCondition(site.Status.Conditions, flexv1.ReadyCondition)).NotTo(BeNil())
				g.Expect(reconciles.reconciledBy("site", reconcile.Request{NamespacedName: key})).
					To(And(HaveKey(owner), HaveLen(1)), "the site reconciled by its shard %s only", owner)
			}).Should(Succeed())

			// Every object a shard caches carries its label: the cache holds no other shard's.
			for _, p := range []*process{a, b} {
				for _, list := range shards.RingLists() {
					Expect(p.mgr.GetCache().List(ctx, list)).To(Succeed())
					Expect(meta.EachListItem(list, func(obj runtime.Object) error {
						o := obj.(client.Object)
						if shards.ShardOf(o) != p.name {
							return fmt.Errorf("%T %s/%s, on %q, in %s's cache", o, o.GetNamespace(), o.GetName(), shards.ShardOf(o), p.name)
						}
						return nil
					})).To(Succeed())
				}
			}
			// And it holds every household of its own: a shard's cached sites are the sites the
			// API server has on it, and the API tier's cache holds every site.
			Eventually(func(g Gomega) {
				all := &flexv1.SiteList{}
				g.Expect(env.Client.List(ctx, all)).To(Succeed())
				cachedByAPI := &flexv1.SiteList{}
				g.Expect(api.mgr.GetCache().List(ctx, cachedByAPI)).To(Succeed())
				g.Expect(cachedByAPI.Items).To(HaveLen(len(all.Items)), "the API tier caches every household")
				held := 0
				for _, p := range []*process{a, b} {
					theirs := &flexv1.SiteList{}
					g.Expect(env.Client.List(ctx, theirs, client.MatchingLabels{shards.ShardLabel: p.name})).To(Succeed())
					cached := &flexv1.SiteList{}
					g.Expect(p.mgr.GetCache().List(ctx, cached)).To(Succeed())
					g.Expect(siteNames(cached)).To(ConsistOf(siteNames(theirs)), "%s's cached sites", p.name)
					g.Expect(cached.Items).NotTo(BeEmpty(), "%s caches its own households", p.name)
					held += len(cached.Items)
				}
				g.Expect(held).To(Equal(len(all.Items)), "every site is cached by exactly one shard")
			}).Should(Succeed())
		}, NodeTimeout(3*time.Minute))

	It("gives a killed shard's sites (its lease held, not released) to another, starting within 3 lease durations",
		func(ctx SpecContext) {
			theirs := owned(Default, ctx, keys)["shard-b"]
			Expect(theirs).NotTo(BeEmpty())
			killed := time.Now()
			b.stop() // the process is gone; its leases stay held until they expire
			for _, key := range theirs {
				Expect(change(ctx, key)).To(Succeed())
			}
			// The sharder finds the lease lapsed, takes it (the shard is dead) and moves its
			// sites; the first of them is reconciled elsewhere within 3 lease durations.
			Eventually(func() error {
				lease := &coordinationv1.Lease{}
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: "shard-b"}, lease); err != nil {
					return err
				}
				if state := lease.Labels[shardingv1alpha1.LabelState]; state != "dead" {
					return fmt.Errorf("shard-b is %q", state)
				}
				// A site that has moved and whose change is reconciled, Ready: evaluated with its
				// charger, which follows it later (the sharder moves every site of the shard before
				// their children), read from the API server meanwhile.
				sites := &flexv1.SiteList{}
				if err := env.Client.List(ctx, sites, client.InNamespace(ns)); err != nil {
					return err
				}
				for i := range sites.Items {
					site := &sites.Items[i]
					ready := meta.FindStatusCondition(site.Status.Conditions, flexv1.ReadyCondition)
					if slices.Contains(theirs, client.ObjectKeyFromObject(site)) && shards.ShardOf(site) != "shard-b" &&
						shards.ShardOf(site) != "" && site.Status.ObservedGeneration == site.Generation &&
						ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == site.Generation {
						return nil
					}
				}
				return errors.New("none of shard-b's sites reconciled elsewhere yet")
			}).WithTimeout(3*leaseDuration - time.Since(killed)).Should(Succeed())
			first := time.Since(killed)
			// The rest follow at the sharder's write rate, one object after another (a minute
			// is ten times what 250 households take here).
			Eventually(func(g Gomega) error {
				if left := owned(g, ctx, theirs)["shard-b"]; len(left) > 0 {
					return fmt.Errorf("%d sites still on shard-b", len(left))
				}
				return converged(ctx, theirs)
			}).WithTimeout(3*leaseDuration + time.Minute - time.Since(killed)).Should(Succeed())
			fmt.Fprintf(GinkgoWriter, "killed shard: %d sites and their chargers; the first reconciled elsewhere after %s, all after %s\n",
				len(theirs), first.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
			// A site reaches shard-a before its charger does: it is evaluated with the charger as
			// the API server has it, rather than published as a site without assets until the
			// charger follows.
			Expect(assetsDropped("shard-a", theirs, killed)).To(BeEmpty(),
				"status writes by shard-a that left one of shard-b's sites with no asset")
		}, NodeTimeout(5*time.Minute))

	It("releases a shard's lease within 5 s of SIGTERM, its sites go to another, and no spec change goes unobserved",
		func(ctx SpecContext) {
			c := startShard(ctx, "shard-c", false)
			var theirs []client.ObjectKey
			Eventually(func(g Gomega) int {
				theirs = owned(g, ctx, keys)["shard-c"]
				return len(theirs)
			}).WithTimeout(60*time.Second).Should(BeNumerically(">=", 150), "the sharder rebalances onto the new shard")
			// The sites' chargers follow them one object after another, at the sharder's write
			// rate: on a loaded machine that takes longer than the sites themselves.
			Eventually(func() error { return converged(ctx, keys) }).WithTimeout(2 * time.Minute).Should(Succeed())
			// Changes made while it stops: the next shard must see each of them.
			for _, key := range theirs {
				Expect(change(ctx, key)).To(Succeed())
			}
			c.cancel() // SIGTERM: the reconcilers end, then the lease is released (the sharder moves at once)
			Eventually(func() (string, error) {
				lease := &coordinationv1.Lease{}
				err := env.Client.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: "shard-c"}, lease)
				return ptr.Deref(lease.Spec.HolderIdentity, ""), err
			}).WithTimeout(5*time.Second).WithPolling(50*time.Millisecond).Should(BeEmpty(), "shard-c's lease, released")
			released := time.Now()
			c.stop()
			// The sharder moves them at its own write rate, one object after another.
			Eventually(func(g Gomega) []client.ObjectKey { return owned(g, ctx, theirs)["shard-c"] }).
				WithTimeout(3 * time.Minute).Should(BeEmpty())
			fmt.Fprintf(GinkgoWriter, "stopped shard: %d sites and their chargers moved %s after the release\n",
				len(theirs), time.Since(released).Round(time.Millisecond))
			Eventually(func() error { return converged(ctx, keys) }).WithTimeout(30 * time.Second).Should(Succeed())
		}, NodeTimeout(6*time.Minute))

	It("lets creates succeed while the sharder is down, and assigns them within one resync of its return", func(ctx SpecContext) {
		sharder.stop()
		var late []client.ObjectKey
		for i := 1000; i < 1020; i++ {
			late = append(late, declareHousehold(ctx, ns, i))
		}
		for _, key := range late {
			site := &flexv1.Site{}
			Expect(env.Client.Get(ctx, key, site)).To(Succeed())
			Expect(shards.ShardOf(site)).To(BeEmpty(), "assigned with no sharder to assign it")
		}
		sharder = startSharder(ctx)
		Eventually(func() error { return converged(ctx, late) }).WithTimeout(sharderResync + 10*time.Second).Should(Succeed())
		keys = append(keys, late...)
	}, NodeTimeout(2*time.Minute))
})

// siteNames are the namespace/name of a list's sites.
func siteNames(l *flexv1.SiteList) []string {
	names := make([]string, len(l.Items))
	for i := range l.Items {
		names[i] = l.Items[i].Namespace + "/" + l.Items[i].Name
	}
	return names
}

// onboardRequest is a REST onboard of a site with a qualifying charger.
func onboardRequest(mpan string) map[string]any {
	return map[string]any{
		"site": map[string]any{"mpan": mpan, "postcode": "SW1A 1AA", "gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
		"assets": []any{map[string]any{"external_id": "charger-" + mpan, "type": "charger", "asset_model": "zappi",
			"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}},
		"proposition": "limited_pause",
	}
}

// call makes a request of the API tier's REST API and decodes its JSON answer. It asserts
// nothing, so polled functions may call it: a request that got no answer is status 0.
func call(p *process, method, path, token string, body any) (int, map[string]any) {
	status, data, err := testenv.Call(p.api.URL, method, path, token, body)
	if err != nil {
		return 0, map[string]any{"error": err.Error()}
	}
	answer := map[string]any{}
	if len(data) > 0 {
		_ = json.Unmarshal(data, &answer)
	}
	return status, answer
}
