// Package household is the one home of a household's rules, as pure verdicts: what a site is
// eligible for under the rules of a catalogue, whether it may enrol, what its withdrawals bind
// it to, how a request merges into what is stored, who holds a meter point, where a
// half-written site stands, which ids objects carry, and what a household may withdraw.
//
// It holds no client, no HTTP and no reconcile loop: internal/householdstore applies these
// verdicts against the API server. The doors — the admission webhooks, the controllers, and
// through the use cases of internal/app the REST API, the hosted flow and the rewards page —
// translate a verdict into their own language: a field.Error, a phase and condition reason,
// an HTTP status and body, a sentence. So whichever door a household comes through, it gets
// the same answer.
package household
