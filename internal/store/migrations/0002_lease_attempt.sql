-- A run is owned by one live lab at a time: the owner and until when its
-- lease holds. A trial counts its attempts, so a resumed lab retries a
-- transient failure once and not forever.
ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_until_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
