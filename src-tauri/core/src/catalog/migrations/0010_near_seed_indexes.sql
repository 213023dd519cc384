-- 0010: two partial indexes for what the import queue reads when it opens (`near_seed`: the
-- perceptual hashes of the photos in the catalog, for near-duplicate hints).
--
-- Without them, each photo's "has a live product?" check scanned the live products (the planner
-- picked a listing index), so opening the queue of a catalog of N hashed photos took O(N²) —
-- measured on a copy of the 100,000-product bench catalog with hashes: 2,000 photos took 260 s.
-- With them: the hashes come from a covering index (the photos' rows, with their thumbnails,
-- are not read) and each check is one index search; 100,000 photos in about 0.12 s.

CREATE INDEX photos_phash ON photos (id, phash) WHERE phash IS NOT NULL;
CREATE INDEX products_live_photo ON products (photo_id) WHERE deleted_at IS NULL;
