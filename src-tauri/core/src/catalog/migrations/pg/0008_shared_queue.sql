-- The import engine on the shared queue (issue 13).
--
-- queued_on: the host name of the desktop that queued an item (the files are on its disk, or on a
-- share it sees). import_item_unreadable: hosts that tried an item and could not read its files
-- (or read other bytes at that path); they do not claim it again. SQLite has both (0013).
ALTER TABLE import_items ADD COLUMN queued_on TEXT;

CREATE TABLE import_item_unreadable (
    item_id BIGINT NOT NULL REFERENCES import_items (id) ON DELETE CASCADE,
    host TEXT NOT NULL,
    PRIMARY KEY (item_id, host)
);

-- The server's clock, unix ms: leases are taken, renewed and expired on it, so desktops whose
-- clocks disagree never take each other's live items.
CREATE FUNCTION pe_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
    $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

-- How a desktop follows the others' changes to the queue, on one clock: the server's.
-- changed_at is the server's time (unix ms) of an item's last change of state, result or lease
-- holder (a lease renewal alone does not count), and import_items_changes is bumped by every such
-- change and by every deletion: a desktop reads the sequence twice a second (one cheap read) and
-- the items changed since its last look only when it moved. Desktops' own clocks may disagree.
ALTER TABLE import_items ADD COLUMN changed_at BIGINT;
CREATE SEQUENCE import_items_changes;

CREATE FUNCTION import_items_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.state IS DISTINCT FROM OLD.state OR NEW.updated_at IS DISTINCT FROM OLD.updated_at
       OR NEW.lease_owner IS DISTINCT FROM OLD.lease_owner THEN
        NEW.changed_at := pe_now_ms();
        PERFORM nextval('import_items_changes');
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER import_items_changed BEFORE INSERT OR UPDATE ON import_items
    FOR EACH ROW EXECUTE FUNCTION import_items_changed();

CREATE FUNCTION import_items_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('import_items_changes');
    RETURN NULL;
END
$$;
CREATE TRIGGER import_items_deleted AFTER DELETE ON import_items
    FOR EACH STATEMENT EXECUTE FUNCTION import_items_deleted();

CREATE INDEX import_items_by_change ON import_items (changed_at);
