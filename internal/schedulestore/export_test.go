package schedulestore

// LatestOfSiteSQL is LatestOfSite's query, for the test of its plan.
const LatestOfSiteSQL = latestOfSiteSQL
