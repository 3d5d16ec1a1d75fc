-- The simulator's guiding predictions, kept across invocations and runs:
-- a resumed lab reads them instead of predicting every candidate again.
-- The key hashes everything a prediction depends on (the simulator's
-- fingerprint, the hardware, the config, the workload, the prompts).
CREATE TABLE guide_cache (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
