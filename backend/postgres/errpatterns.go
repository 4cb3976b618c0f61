package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/sluicetype"
)

// renormalizeVersion is the migration after which every stored error
// pattern is normalised again by this build (0010_error_patterns).
const renormalizeVersion = 10

// renormalizeBatch is how many patterns one UPDATE rewrites.
const renormalizeBatch = 1000

// renormalizeErrorPatterns sets each job's error_pattern to
// sluicetype.NormalizeError of its last error, where they differ, inside the
// migration's transaction.
func (s *Store) renormalizeErrorPatterns(ctx context.Context, tx pgx.Tx) (int, error) {
	rows, err := tx.Query(ctx, s.sql(`SELECT id, last_error, error_pattern FROM {s}.jobs WHERE error_pattern <> ''`))
	if err != nil {
		return 0, fmt.Errorf("error patterns: %w", err)
	}
	var ids, patterns []string
	for rows.Next() {
		var id, last, pattern string
		if err := rows.Scan(&id, &last, &pattern); err != nil {
			rows.Close()
			return 0, fmt.Errorf("error patterns: %w", err)
		}
		if p := sluicetype.NormalizeError(last); p != pattern && p != "" {
			ids, patterns = append(ids, id), append(patterns, p)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("error patterns: %w", err)
	}
	for i := 0; i < len(ids); i += renormalizeBatch {
		j := min(i+renormalizeBatch, len(ids))
		if _, err := tx.Exec(ctx, s.sql(`UPDATE {s}.jobs AS j SET error_pattern = v.p
			FROM unnest($1::text[], $2::text[]) AS v(id, p) WHERE j.id = v.id`), ids[i:j], patterns[i:j]); err != nil {
			return 0, fmt.Errorf("error patterns: %w", err)
		}
	}
	return len(ids), nil
}
