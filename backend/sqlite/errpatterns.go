package sqlite

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
)

// renormalizeVersion is the migration after which every stored error
// pattern is normalised again by this build (0008_error_patterns.sql).
const renormalizeVersion = 8

// renormalizeErrorPatterns sets each job's error_pattern to
// sluicetype.NormalizeError of its last error, where they differ, inside the
// migration's transaction.
func renormalizeErrorPatterns(ctx context.Context, tx *wtx) (int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, last_error, error_pattern FROM jobs WHERE error_pattern != ''`)
	if err != nil {
		return 0, fmt.Errorf("sqlite: error patterns: %w", err)
	}
	type change struct{ id, pattern string }
	var changes []change
	for rows.Next() {
		var id, last, pattern string
		if err := rows.Scan(&id, &last, &pattern); err != nil {
			rows.Close()
			return 0, fmt.Errorf("sqlite: error patterns: %w", err)
		}
		if p := sluicetype.NormalizeError(last); p != pattern && p != "" {
			changes = append(changes, change{id, p})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("sqlite: error patterns: %w", err)
	}
	for _, c := range changes {
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET error_pattern = ? WHERE id = ?`, c.pattern, c.id); err != nil {
			return 0, fmt.Errorf("sqlite: error patterns: %w", err)
		}
	}
	return len(changes), nil
}
