-- Several desktops work one queue (issue 13). A desktop claims an item with
-- `SELECT … FOR UPDATE SKIP LOCKED` and holds a lease on it — which desktop, until when (unix ms)
-- — that it renews while it works; an item whose lease ran out (its desktop crashed or lost the
-- network) goes back to `queued` for another desktop. Server only: on SQLite one process works a
-- catalog's queue (the advisory lock next to the file), so there is nothing to lease.
ALTER TABLE import_items ADD COLUMN lease_owner TEXT CHECK (lease_owner IS NULL OR lease_owner <> '');
ALTER TABLE import_items ADD COLUMN lease_until BIGINT;
ALTER TABLE import_items ADD CONSTRAINT import_items_lease_whole
    CHECK ((lease_owner IS NULL) = (lease_until IS NULL));

-- What the claim reads: the queued items in claim order (interactive first, fewest attempts,
-- oldest), and the leases that may have run out.
CREATE INDEX import_items_claim ON import_items (state, origin, attempts, id) WHERE state = 'queued';
CREATE INDEX import_items_leased ON import_items (lease_until) WHERE lease_owner IS NOT NULL;
