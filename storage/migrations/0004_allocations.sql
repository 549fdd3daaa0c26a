-- Allocations (Ironic API 1.52+): a request for a node by resource class
-- and traits, which the conductor binds to one available node.
--
-- node_uuid is the node an active allocation holds (the node's
-- allocation_uuid and instance_uuid then name the allocation). Deleting the
-- node deletes its allocation, as Ironic's destroy_node does.

CREATE TABLE allocations (
    id                 INTEGER PRIMARY KEY,
    uuid               TEXT NOT NULL UNIQUE,
    name               TEXT UNIQUE,
    node_uuid          TEXT REFERENCES nodes (uuid) ON DELETE CASCADE,
    state              TEXT NOT NULL,
    owner              TEXT,
    last_error         TEXT,
    resource_class     TEXT,
    traits             TEXT NOT NULL DEFAULT '[]',
    candidate_nodes    TEXT NOT NULL DEFAULT '[]',
    extra              TEXT NOT NULL DEFAULT '{}',
    -- hostname of the conductor that processes it (Ironic's
    -- conductor_affinity), so a restarted conductor resumes its own.
    conductor_affinity TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT
);

-- node_uuid also serves the ON DELETE CASCADE lookup.
CREATE INDEX allocations_node_uuid_idx ON allocations (node_uuid);
CREATE INDEX allocations_state_idx ON allocations (state);
CREATE INDEX allocations_resource_class_idx ON allocations (resource_class);
CREATE INDEX allocations_owner_idx ON allocations (owner) WHERE owner IS NOT NULL;

-- An allocation lives as long as the instance_uuid it put on its node: when
-- that is cleared (undeploy, or an operator removing instance_uuid), the
-- allocation goes too, as Ironic's conductor destroys it in both cases. This
-- keeps node and allocation consistent whichever code path clears the field.
-- (PostgreSQL: the same as a trigger function, which clears the node's
-- allocation_uuid before the row is written rather than after.)
-- sqlite:
CREATE TRIGGER nodes_instance_cleared_drops_allocation
AFTER UPDATE OF instance_uuid ON nodes
FOR EACH ROW WHEN OLD.allocation_uuid IS NOT NULL AND NEW.instance_uuid IS NULL
BEGIN
    DELETE FROM allocations WHERE uuid = OLD.allocation_uuid;
    UPDATE nodes SET allocation_uuid = NULL WHERE id = NEW.id;
END;
-- end
-- postgres:
CREATE FUNCTION nodes_instance_cleared_drops_allocation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM allocations WHERE uuid = OLD.allocation_uuid;
    NEW.allocation_uuid := NULL;
    RETURN NEW;
END;
$$;
CREATE TRIGGER nodes_instance_cleared_drops_allocation
BEFORE UPDATE OF instance_uuid ON nodes
FOR EACH ROW WHEN (OLD.allocation_uuid IS NOT NULL AND NEW.instance_uuid IS NULL)
EXECUTE FUNCTION nodes_instance_cleared_drops_allocation();
-- end
