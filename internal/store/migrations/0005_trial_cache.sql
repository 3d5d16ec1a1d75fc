-- How a trial's server came to it without an earlier measurement's prefix
-- cache: a fresh start, a verified reset, a reset, or salted requests
-- (store.Trial.Cache); empty for trials stored before it was recorded.
ALTER TABLE trials ADD COLUMN cache TEXT NOT NULL DEFAULT '';
