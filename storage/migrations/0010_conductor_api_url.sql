-- Several conductors on one PostgreSQL database: each records how the
-- others reach its API, so that a verb on a node can be sent to the node's
-- owner on the hash ring. Not shown in the API (Ironic's conductors have no
-- such field).
ALTER TABLE conductors ADD COLUMN api_url TEXT NOT NULL DEFAULT '';
