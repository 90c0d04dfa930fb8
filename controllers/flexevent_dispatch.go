package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/index"
)

// The FlexEvent controller's part in dispatch (docs/platform.md, "Dispatch: asking the devices"):
// it issues the event's dispatches once, when they are due; cancels the open ones when the event is
// deleted before its end (the flexsite.io/dispatches finalizer); and copies their counts into the
// status, on every reconcile and whenever PostgreSQL tells of a change (a callback on any replica).

// dispatchBatch is how many assets' device states are read in one query.
const dispatchBatch = 1000

// ensureDispatchFinalizer adds the dispatch finalizer to an event that has not ended, so
// that deleting it cancels its open dispatches first; patched: it did, and ev is the patched
// copy the reconcile goes on with.
func (r *FlexEventReconciler) ensureDispatchFinalizer(ctx context.Context, ev *flexv1.FlexEvent, now time.Time) (patched bool, err error) {
	if !now.Before(ev.Spec.EndAt.Time) || controllerutil.ContainsFinalizer(ev, flexv1.DispatchFinalizer) {
		return false, nil
	}
	base := ev.DeepCopy()
	controllerutil.AddFinalizer(ev, flexv1.DispatchFinalizer)
	return true, r.Patch(ctx, ev, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// release lets a deleted event go: before its end, its open dispatches are cancelled first
// (dispatch.cancelled to each asset controller); after it, there is nothing to cancel (the
// dispatches and settlements stay in the database).
func (r *FlexEventReconciler) release(ctx context.Context, ev *flexv1.FlexEvent) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ev, flexv1.DispatchFinalizer) {
		return ctrl.Result{}, nil
	}
	now := r.Now()
	if now.Before(ev.Spec.EndAt.Time) {
		if _, err := r.Dispatches.Cancel(ctx, ev.Namespace, ev.Name, now); err != nil {
			return ctrl.Result{}, err
		}
	}
	base := ev.DeepCopy()
	controllerutil.RemoveFinalizer(ev, flexv1.DispatchFinalizer)
	err := r.Patch(ctx, ev, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// dispatch issues the event's dispatches when they are due and not issued yet, and copies
// their counts into the status. next is when they fall due, when that is later than now
// (zero otherwise).
func (r *FlexEventReconciler) dispatch(ctx context.Context, ev *flexv1.FlexEvent, now time.Time) (next time.Time, err error) {
	var issuedAt *metav1.Time
	if ev.Status.Dispatches != nil {
		issuedAt = ev.Status.Dispatches.IssuedAt
	}
	start := ev.Spec.StartAt.Time
	if issuedAt == nil && dispatch.Dispatchable(start, now) {
		if at := dispatch.IssueAt(ev.CreationTimestamp.Time, start); now.Before(at) {
			next = at
		} else {
			if err := r.issue(ctx, ev, now); err != nil {
				return time.Time{}, err
			}
			issuedAt = &metav1.Time{Time: now.UTC().Truncate(time.Second)}
		}
	}
	counts, err := r.Dispatches.Counts(ctx, ev.Namespace, ev.Name)
	if err != nil {
		return time.Time{}, err
	}
	ev.Status.Dispatches = dispatchesStatus(counts, issuedAt)
	return next, nil
}

// dispatchesStatus is the status's copy of the counts.
func dispatchesStatus(c dispatch.Counts, issuedAt *metav1.Time) *flexv1.FlexDispatches {
	st := &flexv1.FlexDispatches{Issued: c.Issued(), Requested: c.ByStatus[dispatch.Requested],
		Received: c.ByStatus[dispatch.Received], Accepted: c.ByStatus[dispatch.Accepted],
		Rejected: c.ByStatus[dispatch.Rejected], Executed: c.ByStatus[dispatch.Executed],
		Failed: c.ByStatus[dispatch.Failed], Cancelled: c.ByStatus[dispatch.Cancelled],
		IssuedAt: issuedAt, Summary: c.Summary()}
	for _, reason := range dispatch.SkipReasons {
		if n := c.Skipped[reason]; n > 0 {
			st.Skipped = append(st.Skipped, flexv1.FlexSkippedAssets{Reason: flexv1.FlexDispatchSkipReason(reason), Assets: n})
		}
	}
	return st
}

// candidate is an eligible asset of a consenting target site, to be asked or skipped.
type candidate struct {
	siteID, assetID string
	asset           *flexv1.Asset
}

// issue computes who is asked (the settlement's targets, their dispatch consent, their
// assets' verdicts for the proposition, their device states) and issues the dispatches
// exactly once (dispatchstore.Issue: a retry, or another replica, issues nothing again).
func (r *FlexEventReconciler) issue(ctx context.Context, ev *flexv1.FlexEvent, now time.Time) error {
	names, err := r.targetNames(ctx, ev)
	if err != nil {
		return err
	}
	p := ev.Spec.Proposition
	lookup := index.NewLookup(r.Client)
	var skips []dispatchstore.Skip
	var asked []candidate
	for _, name := range names {
		site := &flexv1.Site{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ev.Namespace, Name: name}, site); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			continue // a listed site that is gone has no assets to ask
		}
		siteID := site.Labels[flexv1.IDLabel]
		if siteID == "" {
			siteID = site.Name
		}
		eligible := map[string]bool{}
		for _, a := range site.Status.Assets {
			for _, pe := range a.Propositions {
				if pe.Proposition == p && pe.Eligible {
					eligible[a.Name] = true
				}
			}
		}
		if len(eligible) == 0 {
			continue
		}
		assets, err := lookup.AssetsOfSite(ctx, ev.Namespace, site.Name)
		if err != nil {
			return err
		}
		consent := dispatch.Consents(site.Spec.DispatchMethods, p)
		for _, a := range assets {
			if !eligible[a.Name] || !a.DeletionTimestamp.IsZero() {
				continue
			}
			assetID := a.Labels[flexv1.IDLabel]
			if assetID == "" {
				assetID = a.Name
			}
			if !consent {
				skips = append(skips, dispatchstore.Skip{FlexEvent: ev.Name, SiteID: siteID, AssetID: assetID,
					Reason: dispatch.NoDispatchConsent})
				continue
			}
			asked = append(asked, candidate{siteID: siteID, assetID: assetID, asset: a})
		}
	}
	start, end := ev.Spec.StartAt.UTC(), ev.Spec.EndAt.UTC()
	var ds []dispatchstore.Dispatch
	for len(asked) > 0 {
		b := asked[:min(dispatchBatch, len(asked))]
		asked = asked[len(b):]
		ids := make([]string, len(b))
		for i, c := range b {
			ids[i] = c.assetID
		}
		states, err := r.AssetEvents.Latest(ctx, ev.Namespace, ids)
		if err != nil {
			return err
		}
		for _, c := range b {
			if reason, skip := dispatch.Skip(c.asset.Spec, states[c.assetID].DeviceState(), start); skip {
				skips = append(skips, dispatchstore.Skip{FlexEvent: ev.Name, SiteID: c.siteID, AssetID: c.assetID, Reason: reason})
				continue
			}
			power, _ := dispatch.PowerW(c.asset.Spec)
			ds = append(ds, dispatchstore.Dispatch{FlexEvent: ev.Name, SiteID: c.siteID, AssetID: c.assetID,
				MarketID: ev.Spec.MarketOrDefault(), Proposition: string(ev.Spec.Proposition),
				LevelKW: dispatch.LevelKW(c.asset.Spec.Type, ev.Spec.Direction, power), From: start, To: end,
				EventTimestamp: ev.CreationTimestamp.Time})
		}
	}
	_, err = r.Dispatches.Issue(ctx, ev.Namespace, r.callbackBase(), ds, skips, now)
	return err
}

// DefaultPublicURL is the address the status callbacks of dispatches point at when the
// manager is given no --public-url: the REST API's default address.
const DefaultPublicURL = "http://127.0.0.1:8080"

func (r *FlexEventReconciler) callbackBase() string {
	if r.PublicURL == "" {
		return DefaultPublicURL
	}
	return strings.TrimRight(r.PublicURL, "/")
}

// listenDispatches feeds ch with the events whose dispatches PostgreSQL says changed (a burst
// of a thousand callbacks is coalesced by the bridge), and every event after the connection
// was lost and found again.
func (r *FlexEventReconciler) listenDispatches(ch chan<- event.GenericEvent) func(context.Context) error {
	return bridge(ch, func(ctx context.Context, changes *db.Changes[types.NamespacedName]) {
		r.Dispatches.Listen(ctx, func(organisation, flexEvent string) {
			changes.Note(types.NamespacedName{Namespace: organisation, Name: flexEvent})
		}, changes.Resync)
	}, bridgeTargets{
		of: func(_ context.Context, key types.NamespacedName) []client.Object {
			return []client.Object{&flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
		},
		all: func(ctx context.Context) []client.Object {
			list := &flexv1.FlexEventList{}
			if err := r.List(ctx, list); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "listing flex events to resync their dispatches")
			}
			objs := make([]client.Object, len(list.Items))
			for i := range list.Items {
				objs[i] = &list.Items[i]
			}
			return objs
		},
	})
}

// dispatchMessage is the Ready message's dispatch part.
func dispatchMessage(st *flexv1.FlexDispatches) string {
	if st == nil {
		return ""
	}
	return fmt.Sprintf("; dispatches: %s", st.Summary)
}
