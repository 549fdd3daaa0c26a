-- Readiness probes (/readyz) prove the database takes a write by recording
-- the time of the check here, one row per conductor; nothing reads it back.
CREATE TABLE write_checks (
    conductor  TEXT PRIMARY KEY,
    checked_at TEXT NOT NULL
);
