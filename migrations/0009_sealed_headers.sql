-- Stored endpoints' header values (often a receiver's own token) are sealed at rest like their
-- secrets (docs/operations.md#secrets-at-rest): each value "v1:<key id>:<base64>", bound to the
-- endpoint's name and the header's name. SQL cannot seal (the key lives in the processes, never in
-- the database), so rows written before this migration keep their plain values, marked here, until
-- the first process with the key seals them (src/endpoints/seal-headers.ts); every process reads
-- either form meanwhile. The default is false, so a row written by an older process is marked plain.
alter table :"schema".endpoints add column headers_sealed boolean not null default false;

-- Nothing to seal in no headers; a tombstone needs none (a new endpoint of that name brings its own).
update :"schema".endpoints set headers = '{}', headers_sealed = true where headers = '{}'::jsonb or deleted_at is not null;
