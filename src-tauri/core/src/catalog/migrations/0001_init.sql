-- 0001: photos, extraction attempts (the audit trail) and products.
--
-- Conventions: times are unix milliseconds (INTEGER), written by the caller; tables are STRICT;
-- JSON columns hold a serialized `Product` and are checked with json_valid().

-- One row per distinct image content: the same bytes are the same photo, wherever they were found.
CREATE TABLE photos (
    id              INTEGER PRIMARY KEY,
    sha256          TEXT    NOT NULL UNIQUE
                    CHECK (length(sha256) = 64 AND sha256 NOT GLOB '*[^0-9a-f]*'),
    -- Where the file was last seen; informative only, the file may have moved since.
    original_path   TEXT    NOT NULL,
    file_bytes      INTEGER NOT NULL CHECK (file_bytes >= 0),
    width           INTEGER NOT NULL CHECK (width >= 0),
    height          INTEGER NOT NULL CHECK (height >= 0),
    format          TEXT    NOT NULL,
    thumbnail_jpeg  BLOB    NOT NULL,
    first_seen_at   INTEGER NOT NULL,
    last_seen_at    INTEGER NOT NULL
) STRICT;

-- Every call to Gemini, successful or not. Rows are only ever inserted.
CREATE TABLE attempts (
    id              INTEGER PRIMARY KEY,
    photo_id        INTEGER NOT NULL REFERENCES photos (id),
    model           TEXT    NOT NULL CHECK (model <> ''),
    started_at      INTEGER NOT NULL,
    latency_ms      INTEGER NOT NULL CHECK (latency_ms >= 0),
    -- Token usage as Gemini reported it; NULL when the call returned no usage metadata.
    prompt_tokens   INTEGER CHECK (prompt_tokens >= 0),
    output_tokens   INTEGER CHECK (output_tokens >= 0),
    thoughts_tokens INTEGER CHECK (thoughts_tokens >= 0),
    total_tokens    INTEGER CHECK (total_tokens >= 0),
    outcome         TEXT    NOT NULL CHECK (outcome IN ('proposed', 'failed')),
    proposal_json   TEXT    CHECK (proposal_json IS NULL OR json_valid(proposal_json)),
    error_code      TEXT,
    error_message   TEXT,
    raw_response    TEXT,
    CHECK (CASE outcome
               WHEN 'proposed' THEN proposal_json IS NOT NULL AND error_code IS NULL
               ELSE proposal_json IS NULL AND error_code IS NOT NULL
           END)
) STRICT;

CREATE INDEX attempts_by_photo ON attempts (photo_id, id);
-- The parent key of products (attempt_id, photo_id): an attempt can only back a product of its own photo.
CREATE UNIQUE INDEX attempts_id_photo ON attempts (id, photo_id);

-- At most one product per photo. `revision` starts at 1 and grows with every save; it is the
-- version that optimistic concurrency will compare against.
CREATE TABLE products (
    id              INTEGER PRIMARY KEY,
    photo_id        INTEGER NOT NULL UNIQUE REFERENCES photos (id),
    -- The attempt whose proposal the reviewer started from; NULL for a product entered by hand.
    attempt_id      INTEGER,
    -- What Gemini proposed (a copy of the attempt's proposal), and what the reviewer saved.
    proposed_json   TEXT    CHECK (proposed_json IS NULL OR json_valid(proposed_json)),
    saved_json      TEXT    NOT NULL CHECK (json_valid(saved_json)),
    revision        INTEGER NOT NULL CHECK (revision >= 1),
    -- Denormalized from saved_json, for listing and sorting without parsing JSON.
    name            TEXT    NOT NULL CHECK (trim(name) <> ''),
    brand           TEXT,
    category        TEXT,
    price_amount    REAL    CHECK (price_amount >= 0),
    price_currency  TEXT,
    gtin            TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    CHECK ((price_amount IS NULL) = (price_currency IS NULL)),
    FOREIGN KEY (attempt_id, photo_id) REFERENCES attempts (id, photo_id)
) STRICT;

CREATE INDEX products_by_updated_at ON products (updated_at DESC, id DESC);
-- The child key of that foreign key, so checks against attempts stay cheap.
CREATE INDEX products_by_attempt ON products (attempt_id, photo_id);
