-- 0005: crashes per (fingerprint, step), kept by each crash's own write
-- (a finish plan's FingerprintWrite.StepCrash) and read with the
-- fingerprint's record for the quarantine screen.
CREATE TABLE {s}.fingerprint_step_crashes (
    fingerprint text    NOT NULL,
    step        text    NOT NULL,
    crashes     integer NOT NULL,
    PRIMARY KEY (fingerprint, step)
);
