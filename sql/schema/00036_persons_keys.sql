-- Who owns a deployment's decoder registrations, and keys held to one
-- Unicode form. The rules that use them are the definitions' (jobs.sql:
-- job_decoders_register; cases.sql, waits.sql, jobs.sql, tasks.sql,
-- batches.sql: require_nfc_keys).
--
--   * docket.job_decoders.registered_role is the login role that registered
--     the row: a deployment's registrations belong to the login that first
--     made them. Rows registered before it was recorded stay NULL, and the
--     next login to register them takes them.
--   * Every key -- a case's correlation keys, a message's keys and id, a
--     wait's keys, a job's idempotency key, a task's key, a batch item's key
--     -- is NFC: two keys that differ only in their Unicode normalization
--     (NFC against NFD) would otherwise be two keys, and open two cases.
--     The constraints are NOT VALID: they hold every row written from now
--     on; rows already stored are not rewritten (a key is an identity), and
--     ALTER TABLE ... VALIDATE CONSTRAINT tells whether any is not NFC.
--     IS NFC NORMALIZED needs a UTF8 database, as docket's are.

-- +goose Up

SET LOCAL docket.migrating = 'on';

ALTER TABLE docket.job_decoders ADD COLUMN registered_role text;

COMMENT ON COLUMN docket.job_decoders.registered_role IS
    'The login role that registered the row; a deployment''s rows belong to it. NULL: registered before roles were recorded.';

-- nfc_keys reports whether every key of p_keys is in Unicode NFC (true for
-- an empty or null array: the keys' own constraints say what is required).
CREATE FUNCTION docket.nfc_keys(p_keys text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce((SELECT bool_and(k IS NFC NORMALIZED) FROM unnest(p_keys) k), true);

ALTER TABLE docket.case_keys
    ADD CONSTRAINT case_keys_value_nfc CHECK (value IS NFC NORMALIZED) NOT VALID;
ALTER TABLE docket.messages
    ADD CONSTRAINT messages_keys_nfc CHECK (docket.nfc_keys(keys)) NOT VALID,
    ADD CONSTRAINT messages_message_id_nfc CHECK (message_id IS NFC NORMALIZED) NOT VALID;
ALTER TABLE docket.waits
    ADD CONSTRAINT waits_keys_nfc CHECK (docket.nfc_keys(keys)) NOT VALID;
ALTER TABLE docket.jobs
    ADD CONSTRAINT jobs_idempotency_key_nfc CHECK (idempotency_key IS NFC NORMALIZED) NOT VALID;
ALTER TABLE docket.tasks
    ADD CONSTRAINT tasks_key_nfc CHECK (key IS NFC NORMALIZED) NOT VALID;
ALTER TABLE docket.batch_items
    ADD CONSTRAINT batch_items_key_nfc CHECK (key IS NFC NORMALIZED) NOT VALID;

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.batch_items DROP CONSTRAINT batch_items_key_nfc;
ALTER TABLE docket.tasks DROP CONSTRAINT tasks_key_nfc;
ALTER TABLE docket.jobs DROP CONSTRAINT jobs_idempotency_key_nfc;
ALTER TABLE docket.waits DROP CONSTRAINT waits_keys_nfc;
ALTER TABLE docket.messages DROP CONSTRAINT messages_message_id_nfc, DROP CONSTRAINT messages_keys_nfc;
ALTER TABLE docket.case_keys DROP CONSTRAINT case_keys_value_nfc;
DROP FUNCTION docket.nfc_keys(text[]);
ALTER TABLE docket.job_decoders DROP COLUMN registered_role;
