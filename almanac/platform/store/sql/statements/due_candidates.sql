-- After `due_ranked.sql`, with lanes (`connection_lanes`): the rows wanted, with their lane, locking
-- nothing. Each lane then locks its own (`due_lock.sql`) on its own connection, in the order given
-- here, and takes the part of the pass its rows have among the first :limit: a lane of few tenants
-- gets no more a tenant than a lane of many, and a dead process's runs come first whatever their lane.
SELECT tenant_slug, occurrence_id, {lane_of} AS lane FROM wanted
ORDER BY new, (rn - 1) / :chunk, theirs, served_at, due_at, hashtextextended(tenant_slug, :seed), rn
