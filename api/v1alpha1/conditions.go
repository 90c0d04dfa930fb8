package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The kinds a controller reconciles expose their conditions and observed generation the same
// way, so one piece of controller code summarises every kind's status.

// GetConditions returns the Site's conditions.
func (s *Site) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions replaces the Site's conditions.
func (s *Site) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }

// GetObservedGeneration returns the generation the Site's status was computed from.
func (s *Site) GetObservedGeneration() int64 { return s.Status.ObservedGeneration }

// SetObservedGeneration records the generation the Site's status was computed from.
func (s *Site) SetObservedGeneration(g int64) { s.Status.ObservedGeneration = g }

// GetConditions returns the Asset's conditions.
func (a *Asset) GetConditions() []metav1.Condition { return a.Status.Conditions }

// SetConditions replaces the Asset's conditions.
func (a *Asset) SetConditions(c []metav1.Condition) { a.Status.Conditions = c }

// GetObservedGeneration returns the generation the Asset's status was computed from.
func (a *Asset) GetObservedGeneration() int64 { return a.Status.ObservedGeneration }

// SetObservedGeneration records the generation the Asset's status was computed from.
func (a *Asset) SetObservedGeneration(g int64) { a.Status.ObservedGeneration = g }

// GetConditions returns the Enrolment's conditions.
func (e *Enrolment) GetConditions() []metav1.Condition { return e.Status.Conditions }

// SetConditions replaces the Enrolment's conditions.
func (e *Enrolment) SetConditions(c []metav1.Condition) { e.Status.Conditions = c }

// GetObservedGeneration returns the generation the Enrolment's status was computed from.
func (e *Enrolment) GetObservedGeneration() int64 { return e.Status.ObservedGeneration }

// SetObservedGeneration records the generation the Enrolment's status was computed from.
func (e *Enrolment) SetObservedGeneration(g int64) { e.Status.ObservedGeneration = g }

// GetConditions returns the FlexEvent's conditions.
func (f *FlexEvent) GetConditions() []metav1.Condition { return f.Status.Conditions }

// SetConditions replaces the FlexEvent's conditions.
func (f *FlexEvent) SetConditions(c []metav1.Condition) { f.Status.Conditions = c }

// GetObservedGeneration returns the generation the FlexEvent's status was computed from.
func (f *FlexEvent) GetObservedGeneration() int64 { return f.Status.ObservedGeneration }

// SetObservedGeneration records the generation the FlexEvent's status was computed from.
func (f *FlexEvent) SetObservedGeneration(g int64) { f.Status.ObservedGeneration = g }
