-- 0005: crashes per (fingerprint, step), kept by each crash's own write
-- (a finish plan's FingerprintWrite.StepCrash) and read with the
-- fingerprint's record for the quarantine screen.
CREATE TABLE fingerprint_step_crashes (
    fingerprint TEXT NOT NULL,
    step        TEXT NOT NULL,
    crashes     INTEGER NOT NULL,
    PRIMARY KEY (fingerprint, step)
) WITHOUT ROWID;
