-- 0008: paths are bytes, not text (see `crate::stored_path`).
--
-- On Unix a file name may be any bytes; one that is not valid UTF-8 was stored lossily (U+FFFD)
-- and could not be opened again. `path` stays the text for display; `path_bytes` holds the exact
-- bytes only when they differ from it (a path that is not valid UTF-8), NULL otherwise, so every
-- row from before stays right as it is. Likewise the photo's `original_path_bytes`.

ALTER TABLE import_items ADD COLUMN path_bytes BLOB CHECK (path_bytes IS NULL OR length(path_bytes) > 0);
ALTER TABLE photos ADD COLUMN original_path_bytes BLOB CHECK (original_path_bytes IS NULL OR length(original_path_bytes) > 0);

-- A path waiting, in progress or in a batch is there once: two names that differ only in bytes
-- that are not UTF-8 show the same text, so the bytes are part of the key (x'' for a UTF-8 path;
-- `path_bytes` is never empty).
DROP INDEX import_items_pending_path;
CREATE UNIQUE INDEX import_items_pending_path ON import_items (path, ifnull(path_bytes, x''))
    WHERE state IN ('queued', 'preparing', 'extracting', 'submitted');
