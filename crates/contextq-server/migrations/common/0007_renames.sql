-- A context moved to another external id by the `rename` extension keeps its history: the old
-- id gets a 'delete' version and the new one a 'create' version that names where it came from.
ALTER TABLE context_versions ADD COLUMN renamed_from TEXT;
