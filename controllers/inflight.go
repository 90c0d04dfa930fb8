package controllers

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
)

// A REST request that creates a site writes it first and its assets and enrolment after it.
// If the process dies in between, the half-written site must not stay. The facade therefore
// creates such a site with an in-flight marker naming what the request will write and a
// deadline; the Site controller publishes the site's status only once all of it exists, and
// deletes the site (its finalizer takes whatever children were written) if the deadline
// passes first. The happy path costs no extra write: the marker is set at creation, and
// "provisioned" is a condition in the status write the site gets anyway.

// staleMarkerAfter: a marker whose deadline passed longer ago than this is ignored, so a site
// restored from a backup (with its old annotation) is never mistaken for an abandoned one.
const staleMarkerAfter = 10 * time.Minute

type inFlightState int

const (
	// noMarker: the site carries no (pending) marker.
	noMarker inFlightState = iota
	// inProgress: the request may still be writing; wait until the deadline.
	inProgress
	// provisioned: everything the request named exists.
	provisioned
	// abandoned: the deadline passed with objects missing.
	abandoned
	// expired: the marker is too old to act on.
	expired
)

// InFlightMarker renders the marker for a site whose request will write objects ("Asset/<name>"
// or "Enrolment/<proposition>") before until.
func InFlightMarker(until time.Time, objects []string) string {
	data, _ := json.Marshal(flexv1.InFlight{Until: metaTime(until), Objects: objects})
	return string(data)
}

// inFlight reads the site's marker and checks the objects it names, from the cache and, before
// declaring a site abandoned, from the API server (the cache may simply be behind).
func (r *SiteReconciler) inFlight(ctx context.Context, site *flexv1.Site, now time.Time) (inFlightState, time.Duration, error) {
	raw, ok := site.Annotations[flexv1.InFlightAnnotation]
	if !ok || meta.IsStatusConditionTrue(site.Status.Conditions, flexv1.ProvisionedCondition) {
		return noMarker, 0, nil
	}
	var marker flexv1.InFlight
	if err := json.Unmarshal([]byte(raw), &marker); err != nil {
		return expired, 0, nil // unreadable: nothing sensible to enforce
	}
	if now.After(marker.Until.Add(staleMarkerAfter)) {
		return expired, 0, nil
	}
	complete, err := allExist(ctx, r.Client, site, marker.Objects)
	if err != nil || complete {
		return provisioned, 0, err
	}
	if now.Before(marker.Until.Time) {
		return inProgress, marker.Until.Sub(now), nil
	}
	complete, err = allExist(ctx, r.APIReader, site, marker.Objects)
	if err != nil || complete {
		return provisioned, 0, err
	}
	return abandoned, 0, nil
}

// allExist reports whether every object a marker names exists.
func allExist(ctx context.Context, c client.Reader, site *flexv1.Site, objects []string) (bool, error) {
	var enrolments *flexv1.EnrolmentList
	for _, ref := range objects {
		kind, name, _ := strings.Cut(ref, "/")
		switch kind {
		case "Asset":
			err := c.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: name}, &flexv1.Asset{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
		case "Enrolment":
			if enrolments == nil {
				enrolments = &flexv1.EnrolmentList{}
				if err := c.List(ctx, enrolments, client.InNamespace(site.Namespace),
					client.MatchingFields{index.SiteName: site.Name}); err != nil {
					return false, err
				}
			}
			found := false
			for _, e := range enrolments.Items {
				found = found || string(e.Spec.Proposition) == name
			}
			if !found {
				return false, nil
			}
		}
	}
	return true, nil
}

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }
