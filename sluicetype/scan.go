package sluicetype

// ScanReport is what a store says of a list it served by reading jobs
// (a filter no index of the store serves: on Redis, error text, tags,
// payload. and meta. paths, times) when it reads at most a budget of jobs
// per request: whether the budget ran out before the index walked did,
// how many jobs it examined, and of how many.
type ScanReport struct {
	// Bounded: the scan stopped at the budget; the answer is partial and
	// paging on (the page's cursor) scans further.
	Bounded bool `json:"bounded"`
	// Scanned is how many jobs the scan examined.
	Scanned int64 `json:"scanned"`
	// Total is how many jobs the indexes walked hold (-1 unknown).
	Total int64 `json:"total"`
	// Stop is the last job examined ((state_changed_at, id) order): the
	// next page starts past it. Set when Bounded.
	Stop *Cursor `json:"-"`
}
