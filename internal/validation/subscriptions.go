package validation

import "fmt"

// DefaultMaxSubscriptions is how many notification subscriptions an organisation may have
// unless the manager is told otherwise (--max-subscriptions): each one is watched and
// delivered to by every replica, so their number is bounded like any other input.
const DefaultMaxSubscriptions = 25

// SubscriptionsFull refuses another subscription to an organisation that has have live ones
// when it may have at most maxSubs (nil while there is room). The REST API and the
// Subscription admission webhook both apply it, to the same number.
func SubscriptionsFull(have, maxSubs int) error {
	if have < maxSubs {
		return nil
	}
	return newError("too_many_subscriptions", fmt.Sprintf(
		"The organisation has %d notification subscriptions, the most it may have; delete one before adding another", have))
}
