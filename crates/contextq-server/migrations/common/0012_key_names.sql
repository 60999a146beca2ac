-- Keys an operator can name (`admin create-key --name billing-agent`): shown by list-keys and in
-- the audit rows of key actions. NULL: unnamed (every key before this migration).
ALTER TABLE api_keys ADD COLUMN name TEXT;
