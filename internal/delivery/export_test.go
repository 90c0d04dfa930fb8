package delivery

import "k8s.io/apimachinery/pkg/types"

// SecretWaits is how many times this deliverer has held back a due delivery of the
// subscription to wait for its signing Secret (the waits of events since delivered are
// forgotten): a test's proof that the deliverer made that decision before it asserts nothing
// was sent.
func (d *Deliverer) SecretWaits(uid types.UID) int {
	st := d.stateOf(uid)
	if st == nil {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	n := 0
	for _, waits := range st.secretWaits {
		n += waits
	}
	return n
}

// Expired is how many of the subscription's claimed deliveries this deliverer dropped unposted
// because they waited in its queue past their lease's margin.
func (d *Deliverer) Expired(uid types.UID) int {
	st := d.stateOf(uid)
	if st == nil {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.expired
}

// Unposted is how many of the subscription's deliveries this deliverer has claimed and neither
// posted nor dropped yet.
func (d *Deliverer) Unposted(uid types.UID) int {
	st := d.stateOf(uid)
	if st == nil {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.unposted
}
