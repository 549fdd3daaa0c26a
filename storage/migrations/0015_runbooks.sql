-- Runbooks (API 1.92, traits and description 1.112): named lists of clean or
-- service steps an operator may run on a node that carries a matching
-- trait. Ironic keeps the steps and the traits in tables of their own; here
-- they are JSON arrays in the runbook's row ({"interface", "step", "args",
-- "order"} objects in the runbook's order; trait strings), read and written
-- with the runbook. Same conventions as 0001_init.sql.
CREATE TABLE runbooks (
    id              INTEGER PRIMARY KEY,
    uuid            TEXT NOT NULL UNIQUE,
    name            TEXT NOT NULL UNIQUE,
    description     TEXT,
    steps           TEXT NOT NULL DEFAULT '[]',
    disable_ramdisk BOOLEAN NOT NULL DEFAULT FALSE,
    extra           TEXT NOT NULL DEFAULT '{}',
    public          BOOLEAN NOT NULL DEFAULT FALSE,
    owner           TEXT,
    traits          TEXT NOT NULL DEFAULT '[]',
    created_at      TEXT NOT NULL,
    updated_at      TEXT
);
