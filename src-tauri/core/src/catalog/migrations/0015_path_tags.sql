-- Issue 32: a desktop opens a path of the shared queue only when the row carries its own tag for
-- it (catalog::desktop_key: an HMAC of the path's bytes and the hash it was queued with, under a
-- key that never leaves the desktop). On this computer's own catalog the tag stays NULL: the file
-- is the user's, and every row of it is theirs.
ALTER TABLE import_items ADD COLUMN path_tag TEXT;
ALTER TABLE import_item_photos ADD COLUMN path_tag TEXT;
