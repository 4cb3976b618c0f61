package backend

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/sluicetype"
)

// A canary run's state is kept by every store in two values beside the
// operation: the state as JSON with its sample ids (EncodeCanary), and
// the window's ids (Canary.Recent) as one string joined by RecentSep,
// apart because a batch appends to it in its own transaction
// (OperationProcessBatchParams.Recent) and a Lua script appends to a
// string without decoding JSON.

// RecentSep joins the ids of Canary.Recent (the unit separator, which no
// job id holds: the Redis store joins id filters with it too).
const RecentSep = "\x1f"

// canaryRecord is the stored JSON: the state and its sample ids.
type canaryRecord struct {
	*sluicetype.Canary
	Sample []string `json:"sample_ids,omitempty"`
}

// EncodeCanary is a canary's stored JSON, "" for none.
func EncodeCanary(c *sluicetype.Canary) (string, error) {
	if c == nil {
		return "", nil
	}
	b, err := json.Marshal(canaryRecord{Canary: c, Sample: c.Sample})
	if err != nil {
		return "", fmt.Errorf("canary: %w", err)
	}
	return string(b), nil
}

// DecodeCanary reads a canary's stored values back; nil for an operation
// without one ("").
func DecodeCanary(s, recent string) (*sluicetype.Canary, error) {
	if s == "" {
		return nil, nil
	}
	r := canaryRecord{Canary: &sluicetype.Canary{}}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("canary: %w", err)
	}
	r.Canary.Sample = r.Sample
	r.Canary.SampleSize = len(r.Sample)
	if recent != "" {
		r.Canary.Recent = strings.Split(recent, RecentSep)
	}
	return r.Canary, nil
}

// EncodeRecent joins a canary's window ids as stored.
func EncodeRecent(c *sluicetype.Canary) string {
	if c == nil {
		return ""
	}
	return strings.Join(c.Recent, RecentSep)
}

// AppendRecent is a stored window after a batch changed ids: they are
// appended and only the last keep ids are kept.
func AppendRecent(recent string, ids []string, keep int) string {
	var all []string
	if recent != "" {
		all = strings.Split(recent, RecentSep)
	}
	all = append(all, ids...)
	if len(all) > keep {
		all = all[len(all)-keep:]
	}
	return strings.Join(all, RecentSep)
}
