-- Applied last, after every other definition file and the drop of what they
-- no longer make: the trust model of kit.sql applied to all they made.
-- apply_privileges puts the TRUNCATE-refusing trigger on every docket table,
-- makes each function of docket.api_functions SECURITY DEFINER with a pinned
-- search_path and grants it to its role, and gives the group roles SELECT on
-- the tables and views, and nothing else.
SELECT docket.apply_privileges();
