-- What a trial cost: the seconds its server took to start (0 when it ran
-- on a server already up for its config), the seconds it benchmarked, and
-- the GPUs it held; the lab sums them into engine starts and GPU-hours.
ALTER TABLE trials ADD COLUMN startup_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN bench_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN engine_start INTEGER NOT NULL DEFAULT 0;
