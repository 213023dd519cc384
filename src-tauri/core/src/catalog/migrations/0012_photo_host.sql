-- Which computer a photo's original file is on (issue 13): a team catalog holds photos from many
-- desktops, and `original_path` alone does not say whose disk it names. The host name of the
-- desktop that recorded (or last saw) the photo; NULL for photos recorded before this version.
ALTER TABLE photos ADD COLUMN original_host TEXT;
