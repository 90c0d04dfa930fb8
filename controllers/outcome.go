// Package controllers holds one reconciler per Flexsite kind: Site (eligibility into status,
// cleanup of a site's children), Asset (identity, counted in its site) and Enrolment (active,
// not eligible or withdrawn; withdrawal bookkeeping). The household's rules are
// internal/household's; a reconciler only translates its verdicts into status.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/statuswrites"
)

// A reconcile ends in one of four outcomes, and summarize turns each into the kstatus
// conditions, the requeue and the Event, in one place for every kind:
//   - success (nil): Ready=True; nothing to requeue (watches bring the next change);
//   - stalledError: the object cannot progress until someone changes something: Ready=False
//     and Stalled=True with the reason, a Warning Event, no requeue;
//   - waitingError: progress is pending and needs nobody: Ready=False and Reconciling=True,
//     requeued after the wait (or when a watch fires); a brief wait on an object never
//     observed writes nothing (it already reads as not observed);
//   - any other error: Ready=False and Reconciling=True with reason ReconcileFailed, a Warning
//     Event, and the error returned so that controller-runtime retries with backoff.
// A conflict is none of these: the copy the reconcile worked on was stale, so nothing is
// written and the object is looked at again shortly.

// stalledError says the object cannot progress until someone changes something.
type stalledError struct{ reason, message string }

func (e *stalledError) Error() string { return e.message }

func stalled(reason, message string) error { return &stalledError{reason: reason, message: message} }

// waitingError says progress is pending and needs nobody's help.
type waitingError struct {
	reason, message string
	// after is when to look again; zero waits for a watch event.
	after time.Duration
	// brief: the wait normally ends within moments (a request finishing its writes, a site
	// evaluating a new asset).
	brief bool
}

func (e *waitingError) Error() string { return e.message }

func waiting(after time.Duration, reason, message string) error {
	return &waitingError{reason: reason, message: message, after: after}
}

// waitingBriefly is waiting for something that normally ends within moments.
func waitingBriefly(after time.Duration, reason, message string) error {
	return &waitingError{reason: reason, message: message, after: after, brief: true}
}

// conflictRetryDelay is how soon a reconcile that lost an optimistic-concurrency race runs
// again: the watch event that made our copy stale is usually already queued.
const conflictRetryDelay = 200 * time.Millisecond

// statusObject is a kind whose status summarize writes (every Flexsite kind with a controller).
type statusObject interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
	GetObservedGeneration() int64
	SetObservedGeneration(int64)
}

// summary writes a reconciled object's status.
type summary struct {
	client   client.Client
	recorder recorder.EventRecorder
	// written, when set, records the versions this summary's status writes produce.
	written *statuswrites.Writes
}

// patch summarises the outcome err into obj's conditions and writes obj's status in one
// patch against base (the object as fetched), when anything changed. ready is the Ready
// condition's message on success. It answers the reconcile's result.
func (s summary) patch(ctx context.Context, base, obj statusObject, ready string, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetryDelay}, nil
	}
	if !obj.GetDeletionTimestamp().IsZero() && err == nil {
		return ctrl.Result{}, nil // released: the object is going, nothing to report on it
	}
	var (
		stall   *stalledError
		wait    *waitingError
		result  ctrl.Result
		retErr  error
		warning bool
	)
	conds := obj.GetConditions()
	gen := obj.GetGeneration()
	set := func(t string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&conds, metav1.Condition{Type: t, Status: status, ObservedGeneration: gen,
			Reason: reason, Message: message})
	}
	switch {
	case err == nil:
		set(flexv1.ReadyCondition, metav1.ConditionTrue, flexv1.ReasonSucceeded, ready)
		meta.RemoveStatusCondition(&conds, flexv1.ReconcilingCondition)
		meta.RemoveStatusCondition(&conds, flexv1.StalledCondition)
	case errors.As(err, &stall):
		set(flexv1.ReadyCondition, metav1.ConditionFalse, stall.reason, stall.message)
		set(flexv1.StalledCondition, metav1.ConditionTrue, stall.reason, stall.message)
		meta.RemoveStatusCondition(&conds, flexv1.ReconcilingCondition)
		warning = true
	case errors.As(err, &wait):
		if wait.brief && obj.GetObservedGeneration() < 1 {
			// Never observed: the object already reads as not observed yet (observedGeneration
			// -1), which kstatus reports InProgress, and a write now would be overwritten in
			// moments, when the wait ends.
			return ctrl.Result{RequeueAfter: wait.after}, nil
		}
		set(flexv1.ReadyCondition, metav1.ConditionFalse, wait.reason, wait.message)
		set(flexv1.ReconcilingCondition, metav1.ConditionTrue, wait.reason, wait.message)
		meta.RemoveStatusCondition(&conds, flexv1.StalledCondition)
		result.RequeueAfter = wait.after
	default:
		msg := fmt.Sprintf("Reconcile failed, retrying: %v", err)
		set(flexv1.ReadyCondition, metav1.ConditionFalse, flexv1.ReasonReconcileFailed, msg)
		set(flexv1.ReconcilingCondition, metav1.ConditionTrue, flexv1.ReasonReconcileFailed, msg)
		meta.RemoveStatusCondition(&conds, flexv1.StalledCondition)
		warning, retErr = true, err
	}
	obj.SetConditions(conds)
	obj.SetObservedGeneration(gen)

	if equality.Semantic.DeepEqual(base, obj) {
		return result, retErr
	}
	if perr := s.client.Status().Patch(ctx, obj, client.MergeFrom(base)); perr != nil {
		if apierrors.IsConflict(perr) {
			return ctrl.Result{RequeueAfter: conflictRetryDelay}, nil
		}
		if apierrors.IsNotFound(perr) {
			// Deleted since it was fetched (a kubectl delete between the cache's read and this
			// write): there is nothing left to report on, and its deletion is the next event.
			return ctrl.Result{}, nil
		}
		if retErr == nil {
			retErr = perr
		}
		return ctrl.Result{}, retErr
	}
	s.written.Wrote(obj)
	s.event(base, obj, warning)
	return result, retErr
}

// event tells, as an Event on the object, that its Ready condition changed. A first success
// (an object going straight to Ready the first time it is observed) is not news.
func (s summary) event(base, obj statusObject, warning bool) {
	before := meta.FindStatusCondition(base.GetConditions(), flexv1.ReadyCondition)
	after := meta.FindStatusCondition(obj.GetConditions(), flexv1.ReadyCondition)
	if after == nil || (before != nil && before.Status == after.Status && before.Reason == after.Reason) {
		return
	}
	if before == nil && after.Status == metav1.ConditionTrue {
		return
	}
	eventType := corev1.EventTypeNormal
	if warning {
		eventType = corev1.EventTypeWarning
	}
	s.recorder.Eventf(obj, nil, eventType, after.Reason, "Reconcile", "%s", after.Message)
}
