package pricing

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
)

// cacheReads are the informers' stores of the kinds the prices' reads look up on every request
// (index.StoreOf): the cached objects themselves, shared and read-only, without a client Get's
// copy or a List's lookup of the kind's informer per call. Nil stores (a cache that is not
// informer-backed) leave the reads to the cache's client.
type cacheReads struct {
	once         sync.Once
	sites        toolscache.Indexer
	propositions toolscache.Indexer
	enrolmentSt  toolscache.Indexer
	enrolments   index.Lookup
}

func (s *Service) cacheReads() *cacheReads {
	r := &s.reads
	r.once.Do(func() {
		c := s.Households.Cache
		r.sites = index.StoreOf(c, &flexv1.Site{})
		r.propositions = index.StoreOf(c, &flexv1.Proposition{})
		if st := index.StoreOf(c, &flexv1.Enrolment{}); st != nil {
			r.enrolmentSt = st
			r.enrolments = index.NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Enrolment{}: st})
		} else {
			r.enrolments = index.NewLookup(c)
		}
	})
	return r
}

// enrolmentsOfSite are the site's cached Enrolments (read-only).
func (s *Service) enrolmentsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.Enrolment, error) {
	return s.cacheReads().enrolments.EnrolmentsOfSite(ctx, ns, siteName)
}

// namedEnrolment is the cached Enrolment the API names for the site's enrolment in prop
// (identity.EnrolmentName), read-only; nil when the store has none (another name may still
// enrol the site: the caller then looks the site's Enrolments up).
func (s *Service) namedEnrolment(site *flexv1.Site, prop flexv1.PropositionName) *flexv1.Enrolment {
	st := s.cacheReads().enrolmentSt
	if st == nil {
		return nil
	}
	obj, ok, err := st.GetByKey(site.Namespace + "/" + identity.EnrolmentName(site.Name, prop))
	if err != nil || !ok {
		return nil
	}
	e, _ := obj.(*flexv1.Enrolment)
	return e
}

// siteByName is the cached Site ns/name, read-only (nil when the cache has none).
func (s *Service) siteByName(ctx context.Context, ns, name string) (*flexv1.Site, error) {
	if st := s.cacheReads().sites; st != nil {
		if obj, ok, err := st.GetByKey(ns + "/" + name); err == nil && ok {
			if site, ok := obj.(*flexv1.Site); ok {
				return site, nil
			}
		}
	}
	// Not in the store at hand (or no store): the cache's client says for sure.
	site := &flexv1.Site{}
	if err := s.Households.Cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, site); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return site, nil
}

// proposition is the cached Proposition named name, read-only (nil when the cache has none).
func (s *Service) proposition(ctx context.Context, name string) (*flexv1.Proposition, error) {
	if st := s.cacheReads().propositions; st != nil {
		if obj, ok, err := st.GetByKey(name); err == nil && ok {
			if p, ok := obj.(*flexv1.Proposition); ok {
				return p, nil
			}
		}
	}
	p := &flexv1.Proposition{}
	if err := s.Households.Cache.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return p, nil
}
