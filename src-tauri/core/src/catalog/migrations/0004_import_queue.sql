-- 0004: the bulk-import queue (see `crate::import`).
--
-- One row per file the user dropped or chose (folders expanded), moving through
--   queued → preparing → extracting → ready → saved,   plus failed and skipped.
-- Conventions as in 0001: STRICT, times are unix milliseconds written by the caller, JSON columns
-- are checked with json_valid(). The queue holds paths and results, never images: the prepared
-- photo and its thumbnail are a `photos` row (photo_id).
--
-- Self-contained: it reads only tables of 0001 (photos, attempts) and references `products` by
-- plain id (no foreign key), so a later migration may rebuild `products` freely.

CREATE TABLE import_items (
    id                   INTEGER PRIMARY KEY,
    -- The file as it was given (absolute when the caller gave it so).
    path                 TEXT    NOT NULL CHECK (path <> ''),
    -- SHA-256 of the file's bytes when it was queued (then of the bytes actually prepared); NULL for
    -- a skipped file that was never read.
    sha256               TEXT    CHECK (sha256 IS NULL OR (length(sha256) = 64 AND sha256 NOT GLOB '*[^0-9a-f]*')),
    state                TEXT    NOT NULL
                         CHECK (state IN ('queued', 'preparing', 'extracting', 'ready', 'saved', 'failed', 'skipped')),
    -- Calls sent to Gemini for this item that ended for the item's own sake (an answer, or a
    -- failure of the service after the stack's retries). Not counted: a call the breaker refused,
    -- a quota wait, a rejected key.
    attempts             INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- 1 when the user asked to extract it again although the same bytes are known.
    forced               INTEGER NOT NULL DEFAULT 0 CHECK (forced IN (0, 1)),
    photo_id             INTEGER REFERENCES photos (id),
    -- The attempt whose proposal this item carries (ready, saved).
    attempt_id           INTEGER REFERENCES attempts (id),
    proposal_json        TEXT    CHECK (proposal_json IS NULL OR json_valid(proposal_json)),
    -- The proposal's field flags (JSON array of FieldFlag), and how many there are.
    flags_json           TEXT    CHECK (flags_json IS NULL OR json_valid(flags_json)),
    flag_count           INTEGER NOT NULL DEFAULT 0 CHECK (flag_count >= 0),
    -- The product the item was saved as; `created_product` = 1 when that save created it, and
    -- `saved_revision` its revision right after the save (undo removes only such a product, and only
    -- while it is still at that revision).
    product_id           INTEGER,
    saved_revision       INTEGER CHECK (saved_revision >= 1),
    created_product      INTEGER NOT NULL DEFAULT 0 CHECK (created_product IN (0, 1)),
    -- Why a skipped item is skipped; for duplicates, what it duplicates (plain ids: either row may
    -- be cleared later).
    skip_reason          TEXT    CHECK (skip_reason IN ('not_a_photo', 'unsupported_format', 'unreadable',
                                                        'already_in_catalog', 'already_queued', 'discarded')),
    duplicate_of_item    INTEGER,
    duplicate_of_product INTEGER,
    -- The nearest known photo by perceptual hash (a near-duplicate hint for review), and how far.
    looks_like_photo_id  INTEGER REFERENCES photos (id),
    looks_like_distance  INTEGER CHECK (looks_like_distance BETWEEN 0 AND 64),
    -- The last error (an ErrorCode and its message): why it failed, or why it went back to the
    -- queue. For a skipped item, the message says why it was skipped (with a code only when it is an
    -- error, e.g. unsupported_format).
    error_code           TEXT,
    error_message        TEXT,
    queued_at            INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    CHECK (error_code IS NULL OR error_message IS NOT NULL),
    CHECK ((state = 'skipped') = (skip_reason IS NOT NULL)),
    CHECK (state <> 'skipped' OR error_message IS NOT NULL),
    CHECK (state <> 'failed' OR error_code IS NOT NULL),
    CHECK (state <> 'extracting' OR photo_id IS NOT NULL),
    CHECK (state NOT IN ('ready', 'saved')
           OR (photo_id IS NOT NULL AND attempt_id IS NOT NULL AND proposal_json IS NOT NULL AND flags_json IS NOT NULL)),
    CHECK ((state = 'saved') = (product_id IS NOT NULL AND saved_revision IS NOT NULL)),
    CHECK ((looks_like_photo_id IS NULL) = (looks_like_distance IS NULL))
) STRICT;

-- Claiming the next item (queued, fewest attempts, oldest first) and the counts per state.
CREATE INDEX import_items_by_state ON import_items (state, attempts, id);
-- Duplicates by content.
CREATE INDEX import_items_by_sha256 ON import_items (sha256);
-- "This file is already listed" when the same folder is dropped again (or a run resumes).
CREATE INDEX import_items_by_path ON import_items (path, sha256);
-- A path waiting or in progress is there once: queueing it again is a no-op.
CREATE UNIQUE INDEX import_items_pending_path ON import_items (path)
    WHERE state IN ('queued', 'preparing', 'extracting');
-- The items showing a photo (a near-duplicate hint names the item whose photo it resembles).
CREATE INDEX import_items_by_photo ON import_items (photo_id);

-- A 64-bit difference hash (dHash) of the prepared photo, 16 hex digits, for near-duplicate hints.
ALTER TABLE photos ADD COLUMN phash TEXT CHECK (phash IS NULL OR (length(phash) = 16 AND phash NOT GLOB '*[^0-9a-f]*'));
