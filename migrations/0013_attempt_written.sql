-- Whether an attempt row exists for a (job, lease) (docs/architecture.md#live-jobs-and-history).
--
-- An outcome statement writes each attempt row with its job's transition; a row whose job it did
-- not change (the lease was lost, or the outcome is written again after a failure that hid its
-- commit) is written only if none exists for that lease yet. That check read job_attempts inside
-- the outcome statement, so every prepared plan of it held every day partition of job_attempts
-- (and their indexes), locked and set up at every execution although the check almost never runs:
-- about 0.4 ms of PostgreSQL's time per statement with 18 partitions, more with a month of them,
-- which at the default worker settings (a few jobs per statement) was a tenth of the statement's
-- cost. Behind a PL/pgSQL function the read is planned apart, once per session, and runs only
-- for the rows that need it.
create function :"schema".acw_attempt_written(p_job uuid, p_lease uuid) returns boolean
language plpgsql stable
as $$
begin
  return exists (select 1 from :"schema".job_attempts where job_id = p_job and lease_token = p_lease);
end
$$;
