-- Runs and trials. {{ID}} becomes each dialect's auto-increment key.
CREATE TABLE runs (
    id {{ID}},
    key TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    summary TEXT NOT NULL DEFAULT '',
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);

CREATE TABLE trials (
    id {{ID}},
    run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    stage TEXT NOT NULL,
    name TEXT NOT NULL,
    workload TEXT NOT NULL,
    repeat_no INTEGER NOT NULL,
    config TEXT NOT NULL,
    command TEXT NOT NULL,
    status TEXT NOT NULL,
    failure_class TEXT NOT NULL,
    reason TEXT NOT NULL,
    result TEXT NOT NULL,
    engine_metrics TEXT NOT NULL,
    log_tail TEXT NOT NULL,
    started_ms BIGINT NOT NULL,
    ended_ms BIGINT NOT NULL,
    UNIQUE (run_id, key)
);

CREATE INDEX trials_run ON trials (run_id, id);
