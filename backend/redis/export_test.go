package redis

import "time"

// SetBatchBudget sets the server time after which a bulk batch script
// stops early (batchScriptBudget); a negative budget stops it at its
// first look at the clock.
func SetBatchBudget(s *Store, d time.Duration) { s.batchBudget = d }
