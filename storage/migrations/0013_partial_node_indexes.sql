-- A node create wrote its row into 13 b-trees, each one more WAL frame
-- (two pwrite calls) per create. The filters below single out a few nodes
-- (maintenance, retired, an owner, a lessee, a resource class, a conductor
-- group): their indexes now hold only the nodes that have a value or the
-- flag set, which a new node does not. A filter on the common value
-- (maintenance=false, no owner, the default group '') matches most rows, so
-- walking the table in id order fills a page at once. ListNodes writes the
-- flags as literals (maintenance = TRUE) and adds conductor_group <> ''
-- when no '' is asked for, so that SQLite can prove the partial index
-- covers the query.
DROP INDEX nodes_maintenance_idx;
DROP INDEX nodes_retired_idx;
DROP INDEX nodes_resource_class_idx;
DROP INDEX nodes_owner_idx;
DROP INDEX nodes_lessee_idx;
DROP INDEX nodes_conductor_group_idx;
CREATE INDEX nodes_maintenance_idx ON nodes (maintenance) WHERE maintenance = TRUE;
CREATE INDEX nodes_retired_idx ON nodes (retired) WHERE retired = TRUE;
CREATE INDEX nodes_resource_class_idx ON nodes (resource_class) WHERE resource_class IS NOT NULL;
CREATE INDEX nodes_owner_idx ON nodes (owner) WHERE owner IS NOT NULL;
CREATE INDEX nodes_lessee_idx ON nodes (lessee) WHERE lessee IS NOT NULL;
CREATE INDEX nodes_conductor_group_idx ON nodes (conductor_group) WHERE conductor_group <> '';
