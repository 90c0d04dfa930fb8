package household

// MaxTransactionPence bounds one reward transaction's credit_pence either way: £10,000,000,000,
// far beyond any real credit or withdrawal (a flex event's credit is at most its rate × the
// site's plausible power × its window: settlement's rule 9). Every writer checks it (the REST
// API answers 422, the store refuses it, the database's reward_transactions_credit_bounded
// constraint holds it), so that a site's sums stay far inside a bigint: 9 million
// transactions at the bound before a sum could pass it, and the sums are held at the bound
// even then (internal/rewardstore).
const MaxTransactionPence = 1_000_000_000_000

// CreditInRange reports whether a transaction's credit_pence is within MaxTransactionPence.
func CreditInRange(pence int64) bool {
	return pence >= -MaxTransactionPence && pence <= MaxTransactionPence
}
