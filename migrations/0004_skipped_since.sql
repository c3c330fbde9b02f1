-- When a job's turn first came while its endpoint was unknown or disabled (since its last real
-- attempt). Its waits grow with this age, and a process that starts with the endpoint enabled
-- makes such jobs due at once. `parked_since` keeps its own meaning: since when the endpoint has
-- been unknown, for the 24 h rule (time spent disabled does not count).
alter table :"schema".jobs add column skipped_since timestamptz;
