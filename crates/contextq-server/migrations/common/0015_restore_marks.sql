-- A version written by a restore (extension `restore-marks`): the number of the version whose
-- content it put back. Its action stays `create` or `update` as stored (the CHECK of migration 4
-- is kept: no table is rebuilt); the API shows such a version as `restore`. NULL: not a restore.
ALTER TABLE context_versions ADD COLUMN restored_from BIGINT;
