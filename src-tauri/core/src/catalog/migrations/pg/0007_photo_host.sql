-- SQLite 0012: which computer a photo's original file is on (NULL: recorded before).
ALTER TABLE photos ADD COLUMN original_host TEXT;
