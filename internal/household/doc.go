// Package household is the one home of a household's rules: which rules are in force, what a
// site is eligible for, whether it may enrol, what its withdrawals bind it to, how a request
// merges into what is stored, which objects a half-finished request wrote, which ids objects
// carry, and what goes with a site when it goes.
//
// It holds no HTTP and no reconcile loop. The doors — the admission webhooks, the controllers,
// the REST facade — ask it for a verdict and translate that verdict into their own language:
// a field.Error, a phase and condition reason, an HTTP status and body. So whichever door a
// household comes through, it gets the same answer.
package household
