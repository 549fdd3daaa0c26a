-- Inspection rules (API 1.96): conditions on inspection data and actions on
-- the node, applied after every inspection. Conditions and actions are JSON
-- arrays of {"op", "args", "loop", "multiple", ...} objects in the order the
-- rule gives them. Same conventions as 0001_init.sql.
CREATE TABLE inspection_rules (
    id          INTEGER PRIMARY KEY,
    uuid        TEXT NOT NULL UNIQUE,
    description TEXT,
    priority    INTEGER NOT NULL DEFAULT 0,
    sensitive   BOOLEAN NOT NULL DEFAULT FALSE,
    phase       TEXT NOT NULL DEFAULT 'main',
    conditions  TEXT NOT NULL DEFAULT '[]',
    actions     TEXT NOT NULL DEFAULT '[]',
    created_at  TEXT NOT NULL,
    updated_at  TEXT
);
