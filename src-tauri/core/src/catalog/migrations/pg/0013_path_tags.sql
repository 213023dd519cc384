-- Issue 32: a desktop opens a path of the shared queue only when the row carries its own tag for
-- it (catalog::desktop_key: an HMAC-SHA-256 of the path's bytes and the hash it was queued with,
-- under a key that never leaves the desktop, hex). Whoever can write to this database cannot make
-- one; a row without the queuing desktop's tag is refused there and never opened anywhere else.
ALTER TABLE import_items ADD COLUMN path_tag TEXT;
ALTER TABLE import_item_photos ADD COLUMN path_tag TEXT;
