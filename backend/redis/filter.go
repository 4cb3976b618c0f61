package redis

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

var pathKeyRE = regexp.MustCompile(sluicetype.PathKeyPattern)

// checkFilter refuses what no store may serve: a path whose keys break
// sluicetype.PathKeyPattern.
func checkFilter(f *sluicetype.Filter) error {
	for _, set := range []struct {
		what string
		ms   []sluicetype.PathMatch
	}{{"payload", f.Payload}, {"meta", f.Meta}} {
		for _, m := range set.ms {
			if m.Path == "" {
				return fmt.Errorf("%w: filter: %s path is empty", sluicetype.ErrInvalid, set.what)
			}
			for key := range strings.SplitSeq(m.Path, ".") {
				if !pathKeyRE.MatchString(key) {
					return fmt.Errorf("%w: filter: %s path %q: bad key %q", sluicetype.ErrInvalid, set.what, m.Path, key)
				}
			}
		}
	}
	return nil
}

// match reports whether r meets every condition of f.
func match(r *row, f *sluicetype.Filter, excludeSuperseded bool, asOf *time.Time) bool {
	j := r.j
	if len(f.States) > 0 && !slices.Contains(f.States, j.State) {
		return false
	}
	if len(f.Queues) > 0 && !slices.Contains(f.Queues, j.Queue) {
		return false
	}
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, j.Kind) {
		return false
	}
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, j.ID) {
		return false
	}
	if f.Fingerprint != "" && j.Fingerprint != f.Fingerprint {
		return false
	}
	if f.UniqueKey != "" && j.UniqueKey != f.UniqueKey {
		return false
	}
	if len(f.Tags) > 0 && !slices.ContainsFunc(f.Tags, func(t string) bool { return slices.Contains(j.Tags, t) }) {
		return false
	}
	if f.Error != "" && !strings.Contains(r.le, f.Error) {
		return false
	}
	if f.ErrorPattern != "" && r.ep != f.ErrorPattern {
		return false
	}
	for _, m := range f.Payload {
		if !sluicetype.PathValueMatches(j.Payload, m) {
			return false
		}
	}
	for _, m := range f.Meta {
		if !sluicetype.PathValueMatches(j.Metadata, m) {
			return false
		}
	}
	if f.ExpiresWithin != nil && !slices.ContainsFunc(f.Expiring, func(c sluicetype.ExpiryCut) bool { return c.Holds(j) }) {
		return false
	}
	if f.CreatedAfter != nil && !j.CreatedAt.After(*f.CreatedAfter) {
		return false
	}
	if f.CreatedBefore != nil && !j.CreatedAt.Before(*f.CreatedBefore) {
		return false
	}
	if f.FinalizedAfter != nil && (j.FinalizedAt == nil || !j.FinalizedAt.After(*f.FinalizedAfter)) {
		return false
	}
	if f.FinalizedBefore != nil && (j.FinalizedAt == nil || !j.FinalizedAt.Before(*f.FinalizedBefore)) {
		return false
	}
	if excludeSuperseded && !f.IncludeSuperseded && j.SupersededBy != "" {
		return false
	}
	if asOf != nil && j.StateChangedAt.After(*asOf) {
		return false
	}
	return true
}

// needsPayload reports whether f reads the payload.
func needsPayload(f *sluicetype.Filter) bool { return len(f.Payload) > 0 }
