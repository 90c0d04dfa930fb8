package meterstore

// ImportLock is the import's advisory lock key, for a test to hold it.
const ImportLock = importLock
