-- A node's row version: random when the row is inserted, one more with
-- every UPDATE of the row, whichever conductor writes it. The API keeps
-- rendered node views keyed by it and checks it against the row on every
-- read, so a view is never served for a row that changed since (even by
-- another conductor on the same PostgreSQL). Not shown in the API.
ALTER TABLE nodes ADD COLUMN row_version BIGINT NOT NULL DEFAULT 0;
