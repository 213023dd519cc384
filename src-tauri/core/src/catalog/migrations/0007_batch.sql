-- 0007: batch imports (the Gemini Batch API, half price).
--
-- An import item can be worked in batch mode (`batch` = 1, chosen when it is queued, so the
-- mode survives a restart): prepared as usual, then sent with others as one inline request of a
-- batch, and answered when Gemini has worked the batch. Its states gain `submitted`: the item is
-- in a batch Gemini accepted (`batch_id`), waiting for its answer.
--
-- `batches` has a row per chunk, written *before* the create call (state `submitting`, with a
-- unique display name) and linked to its items; the call's answer (`batches/{id}`) is stored in
-- the transaction that marks those items `submitted`. If the process dies between the call and
-- that transaction, the next run finds the batch by its display name (`GET batches`) before
-- anything is sent again: a chunk is never submitted twice.
--
-- `import_items` is rebuilt (SQLite cannot change a CHECK in place) with the new state, the mode
-- and the link; ids and every column are kept. Nothing references `import_items`, so the drop
-- checks no foreign key. `attempts.batch_name` marks an attempt answered through a batch, which
-- is priced with the model's batch discount.

CREATE TABLE batches (
    id             INTEGER PRIMARY KEY,
    -- Chosen by us before the create call, unique: how a batch whose answer was lost is found.
    display_name   TEXT    NOT NULL UNIQUE CHECK (display_name <> ''),
    -- `batches/{id}` once Gemini accepted it.
    name           TEXT    UNIQUE CHECK (name IS NULL OR name GLOB 'batches/?*'),
    state          TEXT    NOT NULL CHECK (state IN ('submitting', 'pending', 'running', 'succeeded', 'failed',
                                                     'cancelled', 'expired')),
    model          TEXT    NOT NULL,
    requests       INTEGER NOT NULL CHECK (requests > 0),
    created_at     INTEGER NOT NULL,
    submitted_at   INTEGER,
    last_polled_at INTEGER,
    -- Why it failed, was cancelled or expired (what the requeued items say).
    error          TEXT,
    updated_at     INTEGER NOT NULL,
    CHECK ((state = 'submitting') = (name IS NULL)),
    CHECK (state = 'submitting' OR submitted_at IS NOT NULL)
) STRICT;

CREATE TABLE import_items_new (
    id                   INTEGER PRIMARY KEY,
    path                 TEXT    NOT NULL CHECK (path <> ''),
    sha256               TEXT    CHECK (sha256 IS NULL OR (length(sha256) = 64 AND sha256 NOT GLOB '*[^0-9a-f]*')),
    state                TEXT    NOT NULL
                         CHECK (state IN ('queued', 'preparing', 'extracting', 'submitted', 'ready', 'saved', 'failed',
                                          'skipped')),
    attempts             INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    forced               INTEGER NOT NULL DEFAULT 0 CHECK (forced IN (0, 1)),
    photo_id             INTEGER REFERENCES photos (id),
    attempt_id           INTEGER REFERENCES attempts (id),
    proposal_json        TEXT    CHECK (proposal_json IS NULL OR json_valid(proposal_json)),
    flags_json           TEXT    CHECK (flags_json IS NULL OR json_valid(flags_json)),
    flag_count           INTEGER NOT NULL DEFAULT 0 CHECK (flag_count >= 0),
    product_id           INTEGER,
    saved_revision       INTEGER CHECK (saved_revision >= 1),
    created_product      INTEGER NOT NULL DEFAULT 0 CHECK (created_product IN (0, 1)),
    skip_reason          TEXT    CHECK (skip_reason IN ('not_a_photo', 'unsupported_format', 'unreadable',
                                                        'already_in_catalog', 'already_queued', 'discarded')),
    duplicate_of_item    INTEGER,
    duplicate_of_product INTEGER,
    looks_like_photo_id  INTEGER REFERENCES photos (id),
    looks_like_distance  INTEGER CHECK (looks_like_distance BETWEEN 0 AND 64),
    error_code           TEXT,
    error_message        TEXT,
    queued_at            INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    origin               TEXT    NOT NULL DEFAULT 'import' CHECK (origin IN ('import', 'interactive')),
    -- 1: worked through the Batch API (half price, answered within 24 hours).
    batch                INTEGER NOT NULL DEFAULT 0 CHECK (batch IN (0, 1)),
    -- The batch (chunk) the item was submitted in, or is being submitted in.
    batch_id             INTEGER REFERENCES batches (id) ON DELETE SET NULL,
    CHECK (error_code IS NULL OR error_message IS NOT NULL),
    CHECK ((state = 'skipped') = (skip_reason IS NOT NULL)),
    CHECK (state <> 'skipped' OR error_message IS NOT NULL),
    CHECK (state <> 'failed' OR error_code IS NOT NULL),
    CHECK (state NOT IN ('extracting', 'submitted') OR photo_id IS NOT NULL),
    CHECK (state <> 'submitted' OR batch_id IS NOT NULL),
    CHECK (state NOT IN ('ready', 'saved')
           OR (photo_id IS NOT NULL AND attempt_id IS NOT NULL AND proposal_json IS NOT NULL AND flags_json IS NOT NULL)),
    CHECK ((state = 'saved') = (product_id IS NOT NULL AND saved_revision IS NOT NULL)),
    CHECK ((looks_like_photo_id IS NULL) = (looks_like_distance IS NULL))
) STRICT;

INSERT INTO import_items_new (id, path, sha256, state, attempts, forced, photo_id, attempt_id, proposal_json, flags_json,
                              flag_count, product_id, saved_revision, created_product, skip_reason, duplicate_of_item,
                              duplicate_of_product, looks_like_photo_id, looks_like_distance, error_code, error_message,
                              queued_at, updated_at, origin)
SELECT id, path, sha256, state, attempts, forced, photo_id, attempt_id, proposal_json, flags_json,
       flag_count, product_id, saved_revision, created_product, skip_reason, duplicate_of_item,
       duplicate_of_product, looks_like_photo_id, looks_like_distance, error_code, error_message,
       queued_at, updated_at, origin
FROM import_items;

DROP TABLE import_items;
ALTER TABLE import_items_new RENAME TO import_items;

CREATE INDEX import_items_by_state ON import_items (state, origin, attempts, id);
CREATE INDEX import_items_by_sha256 ON import_items (sha256);
CREATE INDEX import_items_by_path ON import_items (path, sha256);
-- A path waiting, in progress or in a batch is there once.
CREATE UNIQUE INDEX import_items_pending_path ON import_items (path)
    WHERE state IN ('queued', 'preparing', 'extracting', 'submitted');
CREATE INDEX import_items_by_photo ON import_items (photo_id);
CREATE INDEX import_items_by_update ON import_items (updated_at);
CREATE INDEX import_items_by_batch ON import_items (batch_id) WHERE batch_id IS NOT NULL;

ALTER TABLE attempts ADD COLUMN batch_name TEXT CHECK (batch_name IS NULL OR batch_name GLOB 'batches/?*');
