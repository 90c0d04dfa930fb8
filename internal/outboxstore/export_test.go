package outboxstore

// The fan-out's scan and its plan setting, for the test of its plan.
const (
	FanOutPlan = fanOutPlan
	FanOutScan = fanOutScan
)

// DueScan is Due's query, for the test of its plan.
const DueScan = dueScan
