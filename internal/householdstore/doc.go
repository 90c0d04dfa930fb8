// Package householdstore applies the household's verdicts (internal/household, which holds no
// client) against the API server: it loads the rules in force and follows the catalogue,
// claims and releases meter points, records withdrawals on a site's history, tells where a
// half-written site stands, and deletes what goes with a site. The use cases
// (internal/app), the controllers and the admission webhooks call it; each write is made
// with optimistic concurrency, read from the API server where a cache could be behind.
package householdstore
