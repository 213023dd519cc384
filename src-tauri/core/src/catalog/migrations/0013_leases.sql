-- The shared queue's columns (issue 13), as on a server catalog (pg/0003, pg/0008), so that the
-- import queue's SQL is the same statements on both backends. A SQLite catalog's queue is worked
-- by one process at a time (the lock next to the file), so here they stay NULL and empty:
-- - lease_owner / lease_until: which desktop works an item and until when (unix ms);
-- - queued_on: the host name of the computer that queued the item (whose disk its files are on);
-- - import_item_unreadable: the hosts that could not read an item's files (another desktop's
--   disk), which do not claim it again.
ALTER TABLE import_items ADD COLUMN lease_owner TEXT CHECK (lease_owner IS NULL OR lease_owner <> '');
ALTER TABLE import_items ADD COLUMN lease_until INTEGER CHECK ((lease_owner IS NULL) = (lease_until IS NULL));
ALTER TABLE import_items ADD COLUMN queued_on TEXT;

CREATE TABLE import_item_unreadable (
    item_id INTEGER NOT NULL REFERENCES import_items (id) ON DELETE CASCADE,
    host TEXT NOT NULL,
    PRIMARY KEY (item_id, host)
) WITHOUT ROWID;
